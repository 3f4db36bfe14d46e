package forwarder

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
)

// TestControlTopicNotServedYet: a broker that does not serve the control
// topic yet when kdelay reads where it ends (on a cluster, the leader of a
// partition created a moment ago) is asked again; kdelay starts. It stopped
// kdelay serve at start on a 3-node cluster.
func TestControlTopicNotServedYet(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault to refuse ListOffsets")
	}
	notYet := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: fx.cfg.Topics.Control(), Err: kerr.UnknownTopicOrPartition, Count: 3})
	fx.start(fx.cfg) // fails the test if Run returns before it is ready
	if n := notYet.Hits(); n != 3 {
		t.Errorf("ListOffsets of the control topic refused %d times, want 3", n)
	}
}

// TestCommandRightAfterStart: a cancel written as kdelay starts is in force
// before the record it names is due, though one partition of the control
// topic was not served for a moment then. On Apache Kafka 3.9.1 the leader of
// a partition created a moment before answered ListOffsets with
// UNKNOWN_TOPIC_OR_PARTITION: the reader's client loaded where that
// partition starts a second later, when its fetch of the other partitions
// already waited for records (up to its 5 s), and the cancel was read after
// the record left (examples/autoclose, three CI runs).
func TestCommandRightAfterStart(t *testing.T) {
	t.Parallel()
	inBubble(t, commandLevels, func(b *bubble) {
		control := b.cfg.WithDefaults().Topics.Control()
		notYet := b.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: control, Partitions: []int32{1},
			Err: kerr.UnknownTopicOrPartition, Count: 3})
		f, stop := b.start(b.cfg)
		defer stop()
		b.cancelOnPartition1(f)
		if n := notYet.Hits(); n != 3 {
			t.Errorf("ListOffsets of control partition 1 refused %d times, want 3", n)
		}
	})
}

// TestCommandAfterAFetchRefused: a cancel written to a partition of the
// control topic just after the broker refused to serve it for a moment (its
// leader moved, and the client's leader epoch is older than the broker's)
// is in force before the record it names is due. The reader's client loads
// the partition's offset again, and then fetched it only once the fetch it
// had sent meanwhile for the other partitions ended, after up to its 5 s:
// the cancel came after the record left.
func TestCommandAfterAFetchRefused(t *testing.T) {
	t.Parallel()
	inBubble(t, commandLevels, func(b *bubble) {
		control := b.cfg.WithDefaults().Topics.Control()
		fetches := b.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: control, Count: -1, Observe: true})
		f, stop := b.start(b.cfg)
		defer stop()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Once the reader fetched and every goroutine waits, its next
		// fetch is with the broker: the fault refuses partition 1 in
		// the one after, and the fetch sent then for the others waits
		// for records.
		if err := fetches.Wait(ctx, 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		refused := b.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: control, Partitions: []int32{1},
			Err: kerr.FencedLeaderEpoch})
		if err := refused.Wait(ctx, 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		b.cancelOnPartition1(f)
	})
}

// cancelOnPartition1 writes order-1, due in 2 s, a witness due in 3 s, and
// a cancel of order-1 to partition 1 of the control topic, and fails the
// test unless f cancelled order-1 and delivered the witness.
func (b *bubble) cancelOnPartition1(f *Forwarder) {
	b.t.Helper()
	arrivals := b.watch("witness", time.Minute)
	b.delayed("order-1", 2*time.Second)
	b.delayed("witness", 3*time.Second)
	cancel := b.commandRecord("order-1", kdelay.CommandCancel)
	cancel.Partition = 1
	b.producer()(cancel)
	if at := arrivals(); at["order-1"] != nil {
		b.t.Errorf("order-1 was cancelled 2 s before it was due, and arrived at %v", at["order-1"])
	}
	if got := f.Stats().Cancelled; got != 1 {
		b.t.Errorf("Stats.Cancelled = %d, want 1", got)
	}
}
