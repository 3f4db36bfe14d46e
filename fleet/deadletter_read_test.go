package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// A DLQ partition whose end offset was listed before the broker wrote the
// last transaction's abort marker ends, as listed, with an aborted record,
// which read_committed skips: the read ends at the marker past that end
// instead of waiting for a record that never comes (Apache Kafka writes
// markers after the transaction's end returns; kfake at once, so the test
// lists the end as it was before the marker).
func TestDeadLettersEndAtALateMarker(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	topics := kdelay.Topics{Prefix: name}
	cluster.CreateTopic(topics.DLQ(), 1, nil)
	cl := cluster.Client(kgo.TransactionalID(name))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, commit := range []bool{true, false} { // offsets 0 and 1, their markers 2 and 3
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		r := dead("kdelay.ingress/0/1", []string{"kdelay-target=orders", "kdelay-delay=0"})
		r.Topic = topics.DLQ()
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := New(Config{Brokers: cluster.Brokers, Topics: topics, Group: name})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got int
	start := time.Now()
	err = f.readDLQ(ctx, topics.DLQ(), map[int32]int64{0: 0}, map[int32]int64{0: 3}, 3, nil, func(DeadLetter) { got++ })
	if err != nil || got != 1 {
		t.Errorf("read the DLQ listed as ending before its last marker: %d dead letters, %v after %s; want the committed one, at once",
			got, err, time.Since(start).Round(time.Millisecond))
	}
}
