// Package fleet reads a running kdelay fleet from Kafka alone, and acts on
// it the way its operators do: what waits in each level and when it moves on,
// the dead letters and their replay, one message found by its id, and the
// commands that cancel, reschedule or run it now. It needs no access to the
// kdelay processes, only to the brokers: kdelay status, dlq, cancel,
// reschedule and run-now use it, and so does the web console.
//
//	f, _ := fleet.New(fleet.Config{Brokers: brokers})
//	defer f.Close()
//	levels, _ := f.Status(ctx, time.Now(), nil)
package fleet

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// Config says which fleet to read: the settings its kdelay serve runs with.
type Config struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string

	// ClientOpts are added to every Kafka client fleet makes: the fleet's
	// TLS and SASL. Default none.
	ClientOpts []kgo.Opt

	// Client, when set, is the client fleet writes commands and asks the
	// brokers with, instead of one of its own: kdelay serve shares the
	// process's client outside any group (forwarder.NewPlainClient). Close
	// does not close it. Reads that consume (heads, the DLQ, a search)
	// still make their own, with Brokers and ClientOpts.
	Client *kgo.Client

	// Topics names kdelay's topics: the prefix serve runs with. Default
	// prefix kdelay.DefaultPrefix, "kdelay".
	Topics kdelay.Topics

	// Group is the consumer group serve runs with. Default
	// forwarder.DefaultGroup, "kdelay".
	Group string

	// Levels are the levels serve runs with. Default levels.Default(), 1s
	// to 2h. Level topics of the prefix not among them are read too: serve
	// drains them.
	Levels levels.Set

	// MaxDelay is serve's max-delay: a replay or a reschedule beyond it is
	// refused, as serve would refuse it. Default kdelay.DefaultMaxDelay,
	// 400 days.
	MaxDelay time.Duration
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.Group = cmp.Or(c.Group, forwarder.DefaultGroup)
	if len(c.Levels) == 0 {
		c.Levels = levels.Default()
	}
	c.MaxDelay = cmp.Or(c.MaxDelay, kdelay.DefaultMaxDelay)
	return c
}

func (c Config) validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("fleet: no Brokers; pass the seed brokers kdelay serve uses")
	}
	return nil
}

// Rules are the rules serve checks records and commands with.
func (c Config) Rules() kdelay.Rules { return kdelay.Rules{Topics: c.Topics, MaxDelay: c.MaxDelay} }

// Fleet reads one kdelay fleet. Its methods may be called concurrently.
type Fleet struct {
	cfg Config
	cl  *kgo.Client
	adm *kadm.Client
}

// New makes the Kafka client the reads share; it connects on first use.
// Close it when done.
func New(cfg Config) (*Fleet, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Client != nil {
		return &Fleet{cfg: cfg, cl: cfg.Client, adm: kadm.NewClient(cfg.Client)}, nil
	}
	cl, err := cfg.client(kgo.ClientID("kdelay-fleet"))
	if err != nil {
		return nil, err
	}
	return &Fleet{cfg: cfg, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// Config is the configuration f reads with, defaults filled in.
func (f *Fleet) Config() Config { return f.cfg }

// Close closes f's client, unless it is Config.Client.
func (f *Fleet) Close() {
	if f.cfg.Client == nil {
		f.cl.Close()
	}
}

// client makes a Kafka client for the fleet's brokers. Reads that consume
// (heads, the DLQ, a search) make one of their own, outside any group, so
// that they move no committed offset and close with the read.
func (c Config) client(opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(slices.Concat([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts, opts)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", strings.Join(c.Brokers, ","), err)
	}
	return cl, nil
}

// MissingTopicError is a topic of kdelay's that does not exist: kdelay serve
// creates its topics at start, with its prefix and levels.
type MissingTopicError struct {
	Topic   string
	Brokers []string
}

func (e *MissingTopicError) Error() string {
	return fmt.Sprintf("topic %s does not exist on %s: kdelay serve creates it at start; check the topic prefix", e.Topic, strings.Join(e.Brokers, ","))
}
