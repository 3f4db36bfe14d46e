package main

import (
	"cmp"
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"
)

// causes are the causes a fold has seen in the last interval or two, and the
// timer that ends their intervals.
//
// Lines are written under mu, so that the first line of a cause is always
// written before its summaries and no summary is written after flush.
// slog's own handlers write under a lock anyway.
type causes struct {
	mu     sync.Mutex
	byKey  map[string]*cause
	timer  *time.Timer // armed while byKey holds a cause
	closed bool        // by flush: from then on every record passes
	seq    uint64      // of the last cause added
}

// cause is one cause, from its first record until an interval without it.
type cause struct {
	key      string
	seq      uint64       // its rank among the causes, by first record
	next     slog.Handler // the handler of the last record, to write the summaries
	last     slog.Record  // a clone
	from     time.Time    // start of the current interval
	repeated int          // in the current interval
	total    int          // since the first record, which counts
}

func newCauses() *causes { return &causes{byKey: map[string]*cause{}} }

// handle writes r if it is the first of its cause, and counts it otherwise.
func (c *causes) handle(ctx context.Context, next slog.Handler, key string, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return next.Handle(ctx, r)
	}
	if k, ok := c.byKey[key]; ok {
		k.repeated++
		k.total++
		k.next, k.last = next, r.Clone()
		return nil
	}
	c.seq++
	c.byKey[key] = &cause{key: key, seq: c.seq, next: next, last: r.Clone(), from: time.Now(), total: 1}
	// A new cause's interval ends after every other's: a timer armed for
	// those fires first.
	if c.timer == nil {
		c.timer = time.AfterFunc(foldInterval, c.tick)
	}
	return next.Handle(ctx, r)
}

// tick ends the intervals that are over: each says how many repeats came, or
// that its cause stopped. It rearms the timer for the next interval to end.
func (c *causes) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	now := time.Now()
	next := time.Duration(0)
	for _, k := range c.inOrder() {
		if left := k.from.Add(foldInterval).Sub(now); left > 0 {
			next = minPositive(next, left)
			continue
		}
		switch {
		case k.repeated > 0:
			k.summary(now)
			next = minPositive(next, foldInterval)
		case k.total > 1:
			k.stopped(now)
			delete(c.byKey, k.key)
		default: // seen once: its line said all there is
			delete(c.byKey, k.key)
		}
	}
	c.timer = nil
	if next > 0 {
		c.timer = time.AfterFunc(next, c.tick)
	}
}

// flush writes the repeats counted in the intervals not yet over, and lets
// every record pass from then on: serve calls it once it is done, so that
// what it counted last is not lost when the process exits.
func (c *causes) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	now := time.Now()
	for _, k := range c.inOrder() {
		if k.repeated > 0 {
			k.summary(now)
		}
	}
}

// inOrder are the causes in the order of their first lines, so that the
// lines about several causes come in that order too.
func (c *causes) inOrder() []*cause {
	ks := slices.Collect(maps.Values(c.byKey))
	slices.SortFunc(ks, func(a, b *cause) int { return cmp.Compare(a.seq, b.seq) })
	return ks
}

// summary writes the line that says how many repeats came since from, and
// starts the next interval at now.
func (k *cause) summary(now time.Time) {
	// Rounded: the timer fires a millisecond or so late, and 10s reads
	// better than 10.001s.
	k.write(now, slog.Int("repeated", k.repeated), slog.Duration("interval", now.Sub(k.from).Round(100*time.Millisecond)))
	k.from, k.repeated = now, 0
}

// stopped writes the line that says the cause stopped, and when it was last
// seen: up to two intervals before this line.
func (k *cause) stopped(now time.Time) {
	k.write(now, slog.Bool("stopped", true), slog.Int("total", k.total), slog.Time("last_seen", k.last.Time))
}

// write writes the last record again at now, with more attributes. There
// is no caller to return an error to: the line is lost, as slog loses a
// line its writer refuses.
func (k *cause) write(now time.Time, more ...slog.Attr) {
	r := k.last.Clone()
	r.Time = now
	r.AddAttrs(more...)
	_ = k.next.Handle(context.Background(), r)
}

// minPositive is the smaller of a and b, where 0 means none yet.
func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}
