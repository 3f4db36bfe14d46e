package bench

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// TestCollectorArrival: a record counts once in every group it was sent
// for, late by its arrival minus its kdelay-deliver-at; a second copy is a
// duplicate, and a record the benchmark did not send counts in no group.
func TestCollectorArrival(t *testing.T) {
	t.Parallel()
	c := &collector{progress: make(chan struct{}, 1)}
	level, steady := newLateness("level=1s"), newLateness(GroupSteady)
	id := c.expect(level, steady)
	due := time.UnixMilli(1_790_000_000_000)
	record := func(id []byte, due time.Time) *kgo.Record {
		return &kgo.Record{Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderID, Value: id},
			{Key: kdelay.HeaderDeliverAt, Value: strconv.AppendInt(nil, due.UnixMilli(), 10)},
		}}
	}
	at := due.Add(1500 * µs)
	c.take(kgo.Fetches{{Topics: []kgo.FetchTopic{{Partitions: []kgo.FetchPartition{{Records: []*kgo.Record{
		record(id, due),
		record(id, due),                 // again: a duplicate
		record([]byte("99"), due),       // not one the benchmark sent
		record([]byte("x"), due),        // not an id
		{Headers: []kgo.RecordHeader{}}, // no headers at all
	}}}}}}}, at)

	for _, g := range []*lateness{level, steady} {
		s := g.summary()
		if s.Sent != 1 || s.Delivered != 1 || s.Duplicates != 1 || s.Early != 0 || s.Max != 1500*µs {
			t.Errorf("%s: %+v; want 1 sent, 1 delivered, 1 duplicate, late by 1.5ms", s.Name, s)
		}
	}
	if c.strange != 3 {
		t.Errorf("%d strange records, want 3", c.strange)
	}
	if expected, arrived := c.counts(); expected != 1 || arrived != 1 {
		t.Errorf("%d expected, %d arrived; want 1 and 1", expected, arrived)
	}
	select {
	case <-c.progress:
	default:
		t.Error("no progress signalled after a record arrived")
	}
}
