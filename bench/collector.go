package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// collector reads a target topic from its start and records how late each
// record it expects arrives. A record is stamped with the time the poll that
// returned it came back, which is when a consumer of the target would have
// it in hand.
type collector struct {
	cl  *kgo.Client
	log *slog.Logger

	mu       sync.Mutex
	groups   [][]*lateness // by id: the groups each record counts in
	seen     []bool
	named    map[string]int  // ids by a kdelay-id the benchmark did not number: a schedule's occurrences
	arrived  int             // distinct expected records
	strange  int64           // records without our id or a kdelay-deliver-at
	next     map[int32]int64 // by partition: the offset after the last record read
	rereads  int64           // records read again at an offset read before
	trace    *trace          // nil unless asked for: the fault driver's
	progress chan struct{}
	done     chan struct{} // closed when consume has returned
}

// newCollector reads topic with opts; traced keeps a trace of every
// record's arrivals.
func newCollector(brokers []string, opts []kgo.Opt, topic string, traced bool, log *slog.Logger) (*collector, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("consume %s: %w", topic, err)
	}
	c := &collector{cl: cl, log: log.With("topic", topic), progress: make(chan struct{}, 1), done: make(chan struct{})}
	if traced {
		c.trace = &trace{}
	}
	return c, nil
}

// expect registers a record that counts in groups and returns its
// kdelay-id.
func (c *collector) expect(groups ...*lateness) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strconv.AppendInt(nil, int64(c.add(groups)), 10)
}

// add registers a record that counts in groups and returns its number;
// mu must be held.
func (c *collector) add(groups []*lateness) int {
	for _, g := range groups {
		g.sent++
	}
	c.groups = append(c.groups, groups)
	c.seen = append(c.seen, false)
	if c.trace != nil {
		c.trace.grow()
	}
	return len(c.groups) - 1
}

// expectNamed registers a record whose kdelay-id is id, not one expect
// numbered: an occurrence of a schedule, "<schedule>@<time>".
func (c *collector) expectNamed(id string, groups ...*lateness) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.named == nil {
		c.named = map[string]int{}
	}
	c.named[id] = c.add(groups)
}

// consume reads the target until ctx ends, then closes the client.
func (c *collector) consume(ctx context.Context) {
	defer close(c.done)
	defer c.cl.Close()
	for ctx.Err() == nil {
		fetches := c.cl.PollFetches(ctx)
		now := time.Now()
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("consume_failed", "partition", p, "err", err)
			}
		})
		c.take(fetches, now)
	}
}

func (c *collector) take(fetches kgo.Fetches, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.arrived
	fetches.EachRecord(func(r *kgo.Record) {
		if c.reread(r) {
			return
		}
		c.arrival(r, now)
	})
	if c.arrived != before {
		select {
		case c.progress <- struct{}{}:
		default:
		}
	}
}

// reread reports whether r sits at an offset the collector read before: its
// client went back (after a broker restart it may find its position out of
// range and start the partition again), which is not a second copy of the
// record. mu must be held.
func (c *collector) reread(r *kgo.Record) bool {
	if c.next == nil {
		c.next = make(map[int32]int64)
	}
	next, ok := c.next[r.Partition]
	if ok && r.Offset < next {
		if c.rereads == 0 {
			c.log.Warn("collector_reread", "partition", r.Partition, "offset", r.Offset, "next", next)
		}
		c.rereads++
		return true
	}
	c.next[r.Partition] = r.Offset + 1
	return false
}

// arrival records one record; mu must be held.
func (c *collector) arrival(r *kgo.Record, now time.Time) {
	text, due, ok := parseDelivered(r)
	id, err := strconv.Atoi(text)
	if err != nil {
		// Not a number expect gave: a schedule's occurrence (expectNamed).
		var named bool
		id, named = c.named[text]
		ok = ok && named
	}
	if !ok || id < 0 || id >= len(c.groups) {
		c.strange++
		return
	}
	if c.trace != nil {
		c.trace.arrival(id, now)
	}
	if c.seen[id] {
		for _, g := range c.groups[id] {
			g.dups++
		}
		return
	}
	c.seen[id] = true
	c.arrived++
	for _, g := range c.groups[id] {
		g.record(now.Sub(due), due, now)
	}
}

// parseDelivered reads a record's kdelay-id (the number the benchmark
// gave it, or a schedule's occurrence id) and the kdelay-deliver-at kdelay
// wrote on it.
func parseDelivered(r *kgo.Record) (id string, due time.Time, ok bool) {
	var idOK, dueOK bool
	for _, h := range r.Headers {
		switch h.Key {
		case kdelay.HeaderID:
			id, idOK = string(h.Value), true
		case kdelay.HeaderDeliverAt:
			at, err := kdelay.ParseDeliverAt(string(h.Value))
			due, dueOK = at, err == nil
		}
	}
	return id, due, idOK && dueOK
}

// counts returns how many records were expected and how many arrived.
func (c *collector) counts() (expected, arrived int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.groups), c.arrived
}

// of returns how many records of g were sent and how many arrived.
func (c *collector) of(g *lateness) (sent, delivered int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return g.sent, g.delivered
}

// wait returns once every expected record arrived, or at the deadline, or
// when ctx ends.
func (c *collector) wait(ctx context.Context, deadline time.Time) error {
	return c.waitFor(ctx, deadline, func() bool {
		expected, arrived := c.counts()
		return arrived >= expected
	})
}

// waitFor returns once done says so, checked at every arrival, or at the
// deadline, or when ctx ends.
func (c *collector) waitFor(ctx context.Context, deadline time.Time, done func() bool) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		if done() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil // what has not arrived is lost
		case <-c.progress:
		}
	}
}
