package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client/internal/route"
	"github.com/kdelay/kdelay/levels"
)

// ProducerConfig configures a Producer. Topics, Levels and MaxDelay describe
// the kdelay server the producer feeds and must match its configuration. The
// zero value of every field is replaced by its default in WithDefaults.
type ProducerConfig struct {
	// Topics names kdelay's topics: the server's topic prefix. Default
	// prefix "kdelay".
	Topics kdelay.Topics

	// Levels are the server's delay levels. A subset works (records take
	// more hops); a level the server lacks has no topic, and NewProducer
	// fails naming it (Send, with SkipTopicCheck). Default levels.Default(),
	// 1s to 2h, the server's default.
	Levels levels.Set

	// MaxDelay is the longest delay Send accepts: the server's max-delay,
	// beyond which it dead-letters records. Default kdelay.DefaultMaxDelay,
	// 400 days, the server's default.
	MaxDelay time.Duration

	// NowFunc returns the current time. Default time.Now.
	NowFunc func() time.Time

	// IDFunc returns the kdelay-id of a record sent without one. Default: a
	// UUIDv7, unique and sorted by time.
	IDFunc func() string

	// TopicCheckTimeout bounds how long NewProducer waits for the broker to
	// say whether kdelay's ingress, level and control topics exist. Default
	// 10s.
	TopicCheckTimeout time.Duration

	// SkipTopicCheck makes NewProducer skip that check, for a process that
	// starts before its broker is reachable: a wrong prefix or level is then
	// found by the first Send, which fails saying which topic is missing.
	// Default false: NewProducer checks.
	SkipTopicCheck bool
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c ProducerConfig) WithDefaults() ProducerConfig {
	c.Topics.Prefix = cmp.Or(c.Topics.Prefix, kdelay.DefaultPrefix)
	if len(c.Levels) == 0 {
		c.Levels = levels.Default()
	}
	c.MaxDelay = cmp.Or(c.MaxDelay, kdelay.DefaultMaxDelay)
	c.TopicCheckTimeout = cmp.Or(c.TopicCheckTimeout, 10*time.Second)
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.IDFunc == nil {
		c.IDFunc = newID
	}
	return c
}

// planner is what decides where a record goes; c has its defaults.
func (c ProducerConfig) planner() route.Planner {
	return route.Planner{Topics: c.Topics, Levels: c.Levels, MaxDelay: c.MaxDelay, NewID: c.IDFunc}
}

// newID is a UUIDv7. It cannot fail: crypto/rand.Read never returns an error
// since Go 1.24.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// Producer sends delayed records with a franz-go client, straight into the
// level topic kdelay's ingress router would choose, saving that hop. It is
// safe for concurrent use.
type Producer struct {
	cl   *kgo.Client
	now  func() time.Time
	plan route.Planner
}

// NewProducer returns a Producer that sends with cl, once the broker says
// that kdelay's ingress topic, the topic of each of cfg's levels and the
// control topic (for Cancel, Reschedule and RunNow) exist: with a wrong
// prefix or a level the server lacks it fails, naming them. It
// waits for the broker until ctx ends or for cfg.TopicCheckTimeout (10s),
// whichever is sooner; set cfg.SkipTopicCheck to construct it without a
// broker. cl must not be transactional or flush manually (Send waits for
// each record's ack), and should not allow auto topic creation: a record for
// a level the server lacks would then wait in a topic nobody reads instead of
// failing.
func NewProducer(ctx context.Context, cl *kgo.Client, cfg ProducerConfig) (*Producer, error) {
	if cl == nil {
		return nil, errors.New("kafka client: nil; pass a *kgo.Client")
	}
	cfg = cfg.WithDefaults()
	plan := cfg.planner()
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	if !cfg.SkipTopicCheck {
		err := route.CheckTopics(ctx, plan, cfg.TopicCheckTimeout, func(ctx context.Context, topics []string) ([]string, error) {
			return missingTopics(ctx, cl, topics)
		})
		if err != nil {
			return nil, err
		}
	}
	return &Producer{cl: cl, now: cfg.NowFunc, plan: plan}, nil
}

// Send writes rec's key, value and headers to be delivered to target when it
// is due, waits for the broker's ack and returns the record's kdelay-id.
//
// The due time is fixed once, from the current time. If the time remaining
// is at least the smallest level, the record goes straight into the largest
// level that fits, with the current time as its timestamp, as kdelay's
// ingress router would have written it; otherwise into the ingress topic with
// kdelay-deliver-at. Either way kdelay never delivers it before it is due.
//
// The id is WithID's if given, else rec's kdelay-id header, else a new one.
// WithHeaders adds headers after rec's. rec is not modified; routing headers
// on it (kdelay-target, kdelay-delay, kdelay-deliver-at) are dropped. Send
// checks the record it built as kdelay will, and a record kdelay would
// dead-letter (an invalid or own target, a delay beyond MaxDelay, an empty
// id) fails with kdelay's reason, before anything is produced.
//
// On a produce error the id is returned too: to retry without risking two
// copies under two ids, call Send again with WithID(id).
func (p *Producer) Send(ctx context.Context, target string, rec *kgo.Record, when Delay, opts ...Option) (id string, err error) {
	r, id, err := p.record(target, rec, when, route.Apply(opts))
	if err != nil {
		return "", fmt.Errorf("send to %s %s: %w", target, when, err)
	}
	if err := p.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			err = p.plan.Missing([]string{r.Topic}, err)
		}
		return id, fmt.Errorf("send %s to %s via %s: %w", id, target, r.Topic, err)
	}
	return id, nil
}

// record is the record Send produces.
func (p *Producer) record(target string, rec *kgo.Record, when Delay, o route.Options) (*kgo.Record, string, error) {
	if rec == nil {
		return nil, "", errors.New("nil record; pass &kgo.Record{Key: key, Value: value}")
	}
	if err := p.plan.CheckPrefix(o); err != nil {
		return nil, "", err
	}
	now := p.now()
	due, err := when.Due(now)
	if err != nil {
		return nil, "", err
	}
	pl, hs, err := route.Record(p.plan, target, rec.Headers, o, now, due)
	if err != nil {
		return nil, "", err
	}
	return &kgo.Record{Topic: pl.Topic, Key: rec.Key, Value: rec.Value, Headers: hs, Timestamp: pl.Timestamp, Context: rec.Context}, pl.ID, nil
}
