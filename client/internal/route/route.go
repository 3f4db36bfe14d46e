// Package route decides where a producer writes a delayed record: straight
// into the level topic kdelay's ingress router would choose for it, or into
// the ingress topic when the time remaining is below the smallest level. It
// is shared by the franz-go producer of package client and the kafka-go one
// of package kafkago, so both write exactly what the server expects. Every
// wire rule it applies is package kdelay's: it builds the record's headers
// with kdelay.AppendHop and checks them with kdelay.Parse, as the server will.
package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/levels"
)

// Planner holds what a producer must share with the kdelay server it feeds.
type Planner struct {
	Topics   kdelay.Topics
	Levels   levels.Set
	MaxDelay time.Duration
	NewID    func() string
}

// Validate says how to fix a Planner that cannot plan.
func (p Planner) Validate() error {
	var errs []error
	if len(p.Levels) == 0 {
		errs = append(errs, errors.New("levels: empty; use the server's levels, e.g. levels.Default()"))
	}
	for i, l := range p.Levels {
		if l.Delay <= 0 {
			errs = append(errs, fmt.Errorf("levels: %q has delay %s; build the set with levels.Parse", l.Name, l.Delay))
		}
		if i > 0 && l.Delay <= p.Levels[i-1].Delay {
			errs = append(errs, fmt.Errorf("levels: %q follows %q but is not longer; build the set with levels.Parse", l.Name, p.Levels[i-1].Name))
		}
	}
	if p.MaxDelay <= 0 {
		errs = append(errs, fmt.Errorf("max delay: %s; use the server's max-delay, 400 days by default", p.MaxDelay))
	}
	if p.NewID == nil {
		errs = append(errs, errors.New("id func: nil; leave it unset for UUIDv7 ids"))
	}
	return errors.Join(errs...)
}

// Plan is where one record goes.
type Plan struct {
	Topic     string    // a level topic, or the ingress topic
	Level     string    // the level's name; "" for the ingress topic
	Timestamp time.Time // the record's timestamp: the time the level was chosen
	Due       time.Time // on the whole millisecond, as kdelay-deliver-at says
	ID        string
}

// WriteTopics are the topics a producer writes to: the ingress, every
// level's, and the control topic, which its commands go to.
func (p Planner) WriteTopics() []string {
	ts := []string{p.Topics.Ingress()}
	for _, l := range p.Levels {
		ts = append(ts, p.Topics.Level(l.Name))
	}
	return append(ts, p.Topics.Control())
}

// Missing explains why topics a producer writes to do not exist: a prefix or
// levels the server does not have. err is the broker's, or nil.
func (p Planner) Missing(topics []string, err error) error {
	what := "topic " + topics[0] + " does not exist"
	if len(topics) > 1 {
		what = "topics " + strings.Join(topics, ", ") + " do not exist"
	}
	msg := fmt.Sprintf("%s: is kdelay running with topic prefix %q and levels %v? Topics and Levels must match the server's",
		what, p.prefix(), p.Levels.Names())
	if slices.Contains(topics, p.Topics.Control()) {
		// The one topic a server of the right prefix and levels may lack:
		// it came with commands.
		msg += fmt.Sprintf("; kdelay serve creates %s at start, and a kdelay older than commands has none: upgrade it, or create the topic with cleanup.policy=compact,delete",
			p.Topics.Control())
	}
	if err == nil {
		return errors.New(msg)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

func (p Planner) prefix() string {
	if p.Topics.Prefix == "" {
		return kdelay.DefaultPrefix
	}
	return p.Topics.Prefix
}

// CheckPrefix refuses WithTopicPrefix on a producer: it writes to the topics
// of its configuration, and a prefix of the call's own would be ignored.
func (p Planner) CheckPrefix(o Options) error {
	if o.Prefix != "" {
		return fmt.Errorf("WithTopicPrefix(%q) is for Delayed; a producer writes to the topics of its ProducerConfig, prefix %q", o.Prefix, p.prefix())
	}
	return nil
}

// CheckTopics fails, naming them, if topics a producer writes to are
// missing, so that a wrong prefix or a level the server lacks is found when
// the producer is made rather than at its first send. missing asks the
// broker; it gets at most timeout, less if ctx ends sooner.
func CheckTopics(ctx context.Context, p Planner, timeout time.Duration, missing func(ctx context.Context, topics []string) ([]string, error)) error {
	if timeout < 0 {
		return fmt.Errorf("topic check timeout: %s; leave it 0 for 10s, or set SkipTopicCheck", timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	gone, err := missing(ctx, p.WriteTopics())
	switch {
	case err != nil:
		return fmt.Errorf("check that kdelay's topics exist (prefix %q, levels %v) within %s: %w; is the broker reachable? Set ProducerConfig.SkipTopicCheck to make the producer without the check",
			p.prefix(), p.Levels.Names(), timeout, err)
	case len(gone) > 0:
		return p.Missing(gone, nil)
	}
	return nil
}
