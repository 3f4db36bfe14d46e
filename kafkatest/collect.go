package kafkatest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// Arrival is a record read from a topic and the time the consumer's poll
// returned it. Lateness is measured from At: it includes the broker's and the
// consumer's latency, as a user of kdelay would see it.
type Arrival struct {
	*kgo.Record
	At time.Time
}

// Collector reads a topic from its start in the background for as long as the
// test runs, and keeps every record it reads with the time it arrived.
type Collector struct {
	mu   sync.Mutex
	got  []Arrival
	next map[partition]int64 // the offset after the last record read
}

type partition struct {
	topic string
	p     int32
}

// Collect starts reading topic from its start right away, outside any
// consumer group, and stops when the test ends. opts are added to the client
// after its defaults, so they can override them: kgo.Dialer for a virtual
// network, or kgo.ConsumeTopics to read more topics than one.
//
// Its fetches wait at most 50ms and it may reload metadata every 250ms, so
// it starts reading a topic or partition created after Collect soon after.
func Collect(t testing.TB, brokers []string, topic string, opts ...kgo.Opt) *Collector {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50 * time.Millisecond),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatalf("consume %s: %v", topic, err)
	}
	c := &Collector{next: make(map[partition]int64)}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.run(ctx, t, cl)
	}()
	// Inside a testing/synctest bubble, cleanups run inside the bubble too,
	// so the goroutine has exited before the bubble waits for its own.
	t.Cleanup(func() {
		cancel()
		<-stopped
		cl.Close()
	})
	return c
}

// Collect starts reading topic on the cluster; see [Collect].
func (c *Cluster) Collect(topic string, opts ...kgo.Opt) *Collector {
	c.t.Helper()
	return Collect(c.t, c.Brokers, topic, opts...)
}

func (c *Collector) run(ctx context.Context, t testing.TB, cl *kgo.Client) {
	for {
		fetches := cl.PollFetches(ctx)
		now := time.Now() // right after the poll: what a consumer would see
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) { t.Logf("consume %s/%d: %v", topic, p, err) })
		c.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			// A client that starts a partition again (after a broker
			// restart its position may be out of range) reads the same
			// records again: they are not more copies.
			if next, ok := c.next[partition{r.Topic, r.Partition}]; ok && r.Offset < next {
				return
			}
			c.next[partition{r.Topic, r.Partition}] = r.Offset + 1
			c.got = append(c.got, Arrival{r, now})
		})
		c.mu.Unlock()
	}
}

// Arrivals returns the records read so far, in the order they arrived.
func (c *Collector) Arrivals() []Arrival { return slices.Clone(c.view()) }

// view is what arrived so far, sharing the collector's array: records are
// only ever appended beyond its length.
func (c *Collector) view() []Arrival {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.got[:len(c.got):len(c.got)]
}

// Until returns the records read so far once done holds for them or the
// deadline passes, whichever is first; the caller checks which. done is
// asked every 10ms, so it may depend on time as well as on what arrived, and
// must not change the slice it is given.
func (c *Collector) Until(deadline time.Duration, done func([]Arrival) bool) []Arrival {
	timeout := time.NewTimer(deadline)
	defer timeout.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if got := c.view(); done(got) {
			return slices.Clone(got)
		}
		select {
		case <-timeout.C:
			return c.Arrivals()
		case <-tick.C:
		}
	}
}

// Header returns the value of the record's first header called name.
func Header(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

// DeliverAt returns the due time kdelay wrote on a delivered record, in its
// kdelay-deliver-at header, and fails the test if it is missing or does not
// parse.
func DeliverAt(t testing.TB, r *kgo.Record) time.Time {
	t.Helper()
	v, ok := Header(r, kdelay.HeaderDeliverAt)
	if !ok {
		t.Fatalf("record %q has no %s header", r.Value, kdelay.HeaderDeliverAt)
	}
	due, err := kdelay.ParseDeliverAt(v)
	if err != nil {
		t.Fatalf("record %q: %v", r.Value, err)
	}
	return due
}

// IDs counts the records by kdelay-id ("" for those without one): a record
// delivered twice counts 2.
func IDs(got []Arrival) map[string]int {
	ids := map[string]int{}
	for _, a := range got {
		id, _ := Header(a.Record, kdelay.HeaderID)
		ids[id]++
	}
	return ids
}

// Values counts the records by value: a record delivered twice counts 2.
func Values(got []Arrival) map[string]int {
	n := map[string]int{}
	for _, a := range got {
		n[string(a.Value)]++
	}
	return n
}
