package bench

import (
	"log/slog"
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
	c := &collector{progress: make(chan struct{}, 1), log: slog.New(slog.DiscardHandler)}
	level, steady := newLateness("level=1s"), newLateness(GroupSteady)
	id := c.expect(level, steady)
	due := time.UnixMilli(1_790_000_000_000)
	offset := int64(0)
	record := func(id []byte, due time.Time) *kgo.Record {
		offset++
		return &kgo.Record{Offset: offset, Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderID, Value: id},
			{Key: kdelay.HeaderDeliverAt, Value: strconv.AppendInt(nil, due.UnixMilli(), 10)},
		}}
	}
	at := due.Add(1500 * µs)
	first := record(id, due)
	c.take(kgo.Fetches{{Topics: []kgo.FetchTopic{{Partitions: []kgo.FetchPartition{{Records: []*kgo.Record{
		first,
		record(id, due),           // again, at another offset: a duplicate
		record([]byte("99"), due), // not one the benchmark sent
		record([]byte("x"), due),  // not an id
		{Offset: 5, Headers: []kgo.RecordHeader{}}, // no headers at all
	}}}}}}}, at)
	// The client went back and read the partition again from its start:
	// the same records, not more copies.
	c.take(kgo.Fetches{{Topics: []kgo.FetchTopic{{Partitions: []kgo.FetchPartition{{Records: []*kgo.Record{first}}}}}}}, at)
	if c.rereads != 1 {
		t.Errorf("%d records counted as read again, want 1", c.rereads)
	}

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
