package forwarder

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestCommandAfterItsPartitionMoved: the leader of a partition of the
// control topic moves to the node that leads the others (a broker's death,
// a reassignment), and a cancel written to it just after is in force before
// the record it names is due, 3 s later. The reader's client checks the
// offset of a partition it has read with the new leader (KIP-320), and then
// fetched the partition only once the fetch it had sent meanwhile for the
// others ended, after up to its 5 s: the record was delivered.
func TestCommandAfterItsPartitionMoved(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"}, kfake.NumBrokers(3))
	if fx.cluster.Real() {
		t.Skip("needs kfake to move a leader")
	}
	fake := fx.cluster.Fake
	f, stop := fx.start(fx.cfg)
	defer stop()
	control := fx.cfg.WithDefaults().Topics.Control()
	partitions := int32(len(fake.PartitionInfos(control)))
	if partitions < 2 {
		t.Fatalf("the control topic has %d partitions, want 2 or more", partitions)
	}
	// Partition 0 leads on node 0, the others on node 1; the reader reads
	// a record of partition 0, so that its move is checked.
	for p := range partitions {
		if err := fake.MoveTopicPartition(control, p, min(p, 1)); err != nil {
			t.Fatal(err)
		}
	}
	writer := fx.cluster.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	command := func(id string) {
		t.Helper()
		r := &kgo.Record{Topic: control, Partition: 0, Key: []byte(id), Value: []byte{},
			Headers: []kgo.RecordHeader{{Key: kdelay.HeaderCommand, Value: []byte(kdelay.CommandCancel)}}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := writer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("write the cancel of %s: %v", id, err)
		}
	}
	command("first")
	waitFor(t, 30*time.Second, "the reader read the first command", func() bool { return f.Commands().Read >= 1 })

	arrived := fx.cluster.Collect(fx.target)
	if err := fake.MoveTopicPartition(control, 0, 1); err != nil {
		t.Fatal(err)
	}
	fx.send("order-1", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "order-1", kdelay.HeaderDelay, "3s")
	command("order-1")
	fx.send("witness", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "witness", kdelay.HeaderDelay, "4s")
	got := arrived.Until(30*time.Second, func(as []kafkatest.Arrival) bool {
		return slices.ContainsFunc(as, func(a kafkatest.Arrival) bool { return string(a.Value) == "witness" })
	})
	if ids := kafkatest.IDs(got); ids["order-1"] > 0 || ids["witness"] != 1 {
		t.Errorf("arrived %v, want the witness and not order-1, cancelled 3 s before it was due", ids)
	}
}
