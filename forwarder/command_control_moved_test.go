package forwarder

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
// others ended, after up to its 5 s: the record was delivered. On a real
// cluster of 3 nodes or more (KDELAY_TEST_BROKERS) a reassignment and a
// preferred election move the leaders.
func TestCommandAfterItsPartitionMoved(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"}, kfake.NumBrokers(3))
	nodes := nodeIDs(t, fx)
	if len(nodes) < 3 {
		t.Skipf("needs 3 nodes to move a leader between, the cluster has %d", len(nodes))
	}
	f, stop := fx.start(fx.cfg)
	defer stop()
	control := fx.cfg.WithDefaults().Topics.Control()
	partitions := partitionsOf(t, fx, control)
	if partitions < 2 {
		t.Fatalf("the control topic has %d partitions, want 2 or more", partitions)
	}
	// Partition 0 leads on one node, the others on another; the reader
	// reads a record of partition 0, so that its move is checked.
	leadOn(t, fx, control, 0, nodes[0])
	for p := int32(1); p < partitions; p++ {
		leadOn(t, fx, control, p, nodes[1])
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
	leadOn(t, fx, control, 0, nodes[1])
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

// nodeIDs returns the cluster's node ids, in order.
func nodeIDs(t *testing.T, fx *fixture) []int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	meta, err := kadm.NewClient(fx.cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return meta.Brokers.NodeIDs()
}

// partitionsOf returns how many partitions topic has.
func partitionsOf(t *testing.T, fx *fixture, topic string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topics, err := kadm.NewClient(fx.cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return int32(len(topics[topic].Partitions))
}

// leadOn makes node the leader of topic's partition p. kfake moves it; a
// real cluster gets node first in the partition's replicas, which hold it
// already (replication factor 3 on 3 nodes), and elects the preferred one.
func leadOn(t *testing.T, fx *fixture, topic string, p, node int32) {
	t.Helper()
	if fx.cluster.Fake != nil {
		if err := fx.cluster.Fake.MoveTopicPartition(topic, p, node); err != nil {
			t.Fatal(err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(fx.cl)
	moved := false
	waitFor(t, 30*time.Second, fmt.Sprintf("node %d to lead %s/%d", node, topic, p), func() bool {
		topics, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false
		}
		pd := topics[topic].Partitions[p]
		if pd.Leader == node {
			return true
		}
		if !slices.Contains(pd.Replicas, node) {
			t.Fatalf("node %d holds no replica of %s/%d (%v): the test needs replication factor 3", node, topic, p, pd.Replicas)
		}
		if !moved {
			replicas := append([]int32{node}, slices.DeleteFunc(slices.Clone(pd.Replicas), func(r int32) bool { return r == node })...)
			if _, err := adm.AlterPartitionAssignments(ctx, kadm.AlterPartitionAssignmentsReq{topic: {p: replicas}}); err != nil {
				t.Fatal(err)
			}
			moved = true
		}
		_, _ = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {p: {}}})
		return false
	})
}
