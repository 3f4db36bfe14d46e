// Package route decides where a producer writes a delayed record: straight
// into the level topic kdelay's ingress router would choose for it, or into
// the ingress topic when the time remaining is below the smallest level. It
// is shared by the franz-go producer of package client and the kafka-go one
// of package kafkago, so both write exactly what the server expects.
package route

import (
	"errors"
	"fmt"
	"strconv"
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

// Header is a routing header to append to the user's headers.
type Header struct{ Key, Value string }

// Plan is where one record goes and what it carries.
type Plan struct {
	Topic     string    // a level topic, or the ingress topic
	Level     string    // the level's name; "" for the ingress topic
	Timestamp time.Time // the record's timestamp: the time the level was chosen
	Due       time.Time // on the whole millisecond, as kdelay-deliver-at says
	ID        string
	Headers   []Header // kdelay-id, kdelay-deliver-at, kdelay-target, in the order the server writes them
}

// Plan routes a record for target, due at due, planned at now. id is the
// caller's kdelay-id, or "" for a new one.
//
// The level chosen is the one the server's ingress router would choose for a
// record with timestamp now: the largest that fits the time remaining. Its
// forwarder releases the record at its timestamp plus the level, which is
// never after due, and re-plans from due, as for any hop. Below the smallest
// level the server holds the remainder in memory, so the record goes to the
// ingress topic with its absolute due time and nothing is gained by a hop.
func (p Planner) Plan(target, id string, now, due time.Time) (Plan, error) {
	if err := p.checkTarget(target); err != nil {
		return Plan{}, err
	}
	if far := due.Sub(now); far > p.MaxDelay {
		return Plan{}, fmt.Errorf("due %s is %s away, more than the maximum delay %s: kdelay would dead-letter it; deliver sooner, or raise max-delay on the server and MaxDelay here",
			due.Format(time.RFC3339Nano), far, p.MaxDelay)
	}
	if id == "" {
		id = p.NewID()
	}
	pl := Plan{Topic: p.Topics.Ingress(), Timestamp: now, Due: due, ID: id}
	if l, ok := p.Levels.For(due.Sub(now)); ok {
		pl.Topic, pl.Level = p.Topics.Level(l.Name), l.Name
	}
	pl.Headers = []Header{
		{kdelay.HeaderID, id},
		{kdelay.HeaderDeliverAt, strconv.FormatInt(due.UnixMilli(), 10)},
		{kdelay.HeaderTarget, target},
	}
	return pl, nil
}

// checkTarget refuses what the server would dead-letter for its target.
func (p Planner) checkTarget(target string) error {
	if target == "" {
		return errors.New("target is empty; name the topic to deliver to")
	}
	own := target == p.Topics.Ingress() || target == p.Topics.DLQ()
	for _, l := range p.Levels {
		own = own || target == p.Topics.Level(l.Name)
	}
	if own {
		return fmt.Errorf("target %q is one of kdelay's own topics; name the topic consumers read", target)
	}
	return nil
}

// Missing explains an unknown-topic error for a planned topic: a prefix or a
// level the server does not have.
func (p Planner) Missing(topic string, err error) error {
	return fmt.Errorf("topic %s does not exist: is kdelay running with topic prefix %q and levels %v? Topics and Levels must match the server's: %w",
		topic, p.prefix(), p.Levels.Names(), err)
}

func (p Planner) prefix() string {
	if p.Topics.Prefix == "" {
		return kdelay.DefaultPrefix
	}
	return p.Topics.Prefix
}

// IsRouting reports the headers kdelay routes by. A caller's copies are
// dropped (the server dead-letters a record that carries one twice), except
// kdelay-id, which is kept as the record's id.
func IsRouting(key string) bool {
	switch key {
	case kdelay.HeaderTarget, kdelay.HeaderDelay, kdelay.HeaderDeliverAt, kdelay.HeaderID:
		return true
	}
	return false
}

// Split returns the headers that are not routing headers, in order, and the
// caller's kdelay-id, "" when absent or empty.
func Split[H any](hs []H, key func(H) string, value func(H) string) (user []H, id string, err error) {
	user = make([]H, 0, len(hs)+3)
	ids := 0
	for _, h := range hs {
		k := key(h)
		if !IsRouting(k) {
			user = append(user, h)
			continue
		}
		if k == kdelay.HeaderID {
			ids++
			id = value(h)
		}
	}
	if ids > 1 {
		return nil, "", fmt.Errorf("header %s is set %d times; set it once", kdelay.HeaderID, ids)
	}
	return user, id, nil
}
