package forwarder

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// heldDelay is below the smallest level of these tests (10s): every record
// sent with it is held in memory by the ingress's forwarder, for seconds.
const heldDelay = 8 * time.Second

// TestStopHandsHeldRecordsBack stops a forwarder that holds records below
// the smallest level. It must not wait for them to fall due, which held up
// the stop (and, in a fleet, the partitions' next owner) for up to the
// smallest level: it writes them back to the ingress, and the next
// forwarder delivers each once, none early.
func TestStopHandsHeldRecordsBack(t *testing.T) {
	t.Parallel()
	for _, d := range []Delivery{AtLeastOnce, ExactlyOnce} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fx := setup(t, []string{"10s", "20s"})
			cfg := fx.cfg
			cfg.Delivery = d
			arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			f, stop := fx.start(cfg)
			due := sendHeld(t, fx, 4)
			// Exactly-once holds one record of a partition at a time
			// (txn.go); the ones behind it stay in the ingress.
			waitFor(t, heldDelay/2, "records to be held", func() bool { return f.Stats().Held >= 1 })

			stop()
			// No forwarder runs now: whatever arrives, the stop delivered.
			if got := arrived.Until(time.Second, atLeast(1)); len(got) > 0 {
				t.Errorf("the stop delivered %d held records: it waited for them to fall due", len(got))
			}
			if s := f.Stats(); s.HandedBack != s.Held {
				t.Errorf("Stats(): %d records handed back, want every one held, %d", s.HandedBack, s.Held)
			}

			fx.start(cfg)
			deliveredOnceOnTime(t, arrived, due)
		})
	}
}

// TestRevokeHandsHeldRecordsBack holds records in one forwarder of a group
// and starts a second: the partitions that move take their held records
// with them, written back to the ingress before the first gives them up,
// rather than held up the rebalance (and the poll of every stage) until
// due. Every record is delivered once, none early.
func TestRevokeHandsHeldRecordsBack(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"10s", "20s"})
	a, b := fx.cfg, fx.cfg
	a.InstanceID, b.InstanceID = "a", "b"
	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(a)
	due := sendHeld(t, fx, 8)
	waitFor(t, heldDelay/2, "the records to be held", func() bool { return f.Stats().Held >= int64(len(due)) })

	fx.start(b)
	waitFor(t, heldDelay, "a moved partition's held records to be handed back", func() bool { return f.Stats().HandedBack > 0 })
	if first := earliestOf(due); !time.Now().Before(first) {
		t.Logf("handed back after the records were due: the check below proves nothing")
	} else if got := arrived.Arrivals(); len(got) > 0 {
		t.Errorf("%d records delivered before they were due", len(got))
	}
	deliveredOnceOnTime(t, arrived, due)
}

// sendHeld writes n records due heldDelay after their timestamps, keyed by
// their ids so that they spread over the ingress's partitions, and returns
// their due times by id.
func sendHeld(t *testing.T, fx *fixture, n int) map[string]time.Time {
	t.Helper()
	due := map[string]time.Time{}
	for i := range n {
		id := "held-" + strconv.Itoa(i)
		rec := &kgo.Record{Topic: fx.cfg.Topics.Ingress(), Key: []byte(id), Value: []byte(id), Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(fx.target)},
			{Key: kdelay.HeaderDelay, Value: strconv.AppendInt(nil, heldDelay.Milliseconds(), 10)},
			{Key: kdelay.HeaderID, Value: []byte(id)},
		}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := fx.cl.ProduceSync(ctx, rec).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("produce %s: %v", id, err)
		}
		due[id] = rec.Timestamp.Truncate(time.Millisecond).Add(heldDelay)
	}
	return due
}

func earliestOf(due map[string]time.Time) time.Time {
	var first time.Time
	for _, at := range due {
		first = earliest(first, at)
	}
	return first
}

// deliveredOnceOnTime waits for every record of due and checks each came
// once, none before its due time.
func deliveredOnceOnTime(t *testing.T, arrived *kafkatest.Collector, due map[string]time.Time) {
	t.Helper()
	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == len(due) })
	// A duplicate would come within a fetch of the last record.
	got = arrived.Until(time.Second, atLeast(len(got)+1))
	ids := kafkatest.IDs(got)
	for id := range due {
		if ids[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, ids[id])
		}
	}
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		if a.At.Before(due[id]) {
			t.Errorf("%s arrived %s early", id, due[id].Sub(a.At))
		}
	}
}
