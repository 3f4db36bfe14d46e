package forwarder

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay/kafkatest"
)

// A produce in a transaction that the broker refuses with
// CONCURRENT_TRANSACTIONS is tried again after the transaction backoff, not
// once the client may load metadata again: a Kafka 4 broker answers so
// while the transaction before still writes its markers (KIP-890), which on
// a 3-node cluster held one exactly-once transaction in two for up to the
// forwarder's metadata min age (third_party/franz-go, issue 20). Here the
// min age is an hour, so a retry that waits for metadata never comes.
func TestTxnProduceRefusedAsConcurrentIsRetried(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	if cluster.Real() {
		t.Skip("needs kfake's faults to answer a produce CONCURRENT_TRANSACTIONS; a real broker does so only while it writes markers")
	}
	name := kafkatest.Name(t)
	out := name + ".out"
	cluster.CreateTopic(out, 1, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.Brokers...), kgo.TransactionalID(name),
		kgo.MetadataMinAge(time.Hour), kgo.MetadataMaxAge(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	produce := func(value string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		// Not ProduceSync: a record waiting for metadata outlives its
		// context.
		acked := make(chan error, 1)
		cl.Produce(ctx, &kgo.Record{Topic: out, Value: []byte(value)}, func(_ *kgo.Record, err error) { acked <- err })
		select {
		case err := <-acked:
			if err != nil {
				t.Fatalf("produce %s in a transaction: %v", value, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s not acknowledged within 30s", value)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit the transaction of %s: %v", value, err)
		}
	}
	produce("first") // the client knows the topic's leader from here on

	refused := cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: out, Err: kerr.ConcurrentTransactions})
	defer refused.Remove()
	produce("second")
	if refused.Hits() != 1 {
		t.Fatalf("the fault answered %d produces, want 1: the test proved nothing", refused.Hits())
	}

	got := cluster.Collect(out, kgo.FetchIsolationLevel(kgo.ReadCommitted())).Until(20*time.Second, atLeast(2))
	var read []string
	for _, a := range got {
		read = append(read, string(a.Value))
	}
	if !slices.Equal(read, []string{"first", "second"}) {
		t.Fatalf("read committed %q, want first and second", read)
	}
}
