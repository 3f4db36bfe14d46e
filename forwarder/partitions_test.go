package forwarder

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestAddedPartitions adds partitions to the ingress and to a level while
// kdelay runs, as docs/SCALING.md tells an operator they may: records
// written to the new ingress partitions, and hops kdelay writes to the new
// level partitions once its clients see them, are each delivered once and
// never early, within a minute. With franz-go's default metadata age, 5
// minutes, only those of the old partitions were.
func TestAddedPartitions(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "5s"})
	arrived := fx.cluster.Collect(fx.target)
	fx.start(fx.cfg)
	// Every client has produced where it will once this is delivered: a
	// client producing to a topic for the first time loads metadata then,
	// and would see the new partitions sooner than a process running for
	// a while does.
	fx.send("warm-up", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "1500")
	if got := arrived.Until(30*time.Second, atLeast(1)); len(got) != 1 {
		t.Fatalf("the warm-up record was not delivered within 30s")
	}

	ingress, level := fx.cfg.Topics.Ingress(), fx.cfg.Topics.Level("1s")
	const added = 4 // to the fixture's 2
	adm := kadm.NewClient(fx.cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resps, err := adm.CreatePartitions(ctx, added, ingress, level)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("add partitions: %v", err)
	}

	// Kafka answers CreatePartitions before its metadata lists them (KRaft
	// publishes them a moment later); a writer loading metadata before
	// then would be refused the new partitions.
	waitFor(t, 30*time.Second, "metadata to list the added partitions", func() bool {
		topics, err := adm.ListTopics(ctx, ingress, level)
		return err == nil && len(topics[ingress].Partitions) == 2+added && len(topics[level].Partitions) == 2+added
	})

	// A writer that knows of the new partitions at once, writing to each
	// ingress partition in turn, a round a second until kdelay has written
	// a hop to a new level partition: its client sees them at its next
	// metadata load, metadataMaxAge at most. 4.5 s hops through the 1s
	// level four times, or fewer if the ingress is late to own a new
	// partition.
	w := fx.cluster.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	due := map[string]time.Time{}
	send := func(i int) {
		value := "r" + strconv.Itoa(i)
		r := &kgo.Record{Topic: ingress, Partition: int32(i % (2 + added)), Key: []byte(value), Value: []byte(value),
			Headers: []kgo.RecordHeader{
				{Key: kdelay.HeaderTarget, Value: []byte(fx.target)},
				{Key: kdelay.HeaderDelay, Value: []byte("4500")},
			}}
		if err := w.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to ingress partition %d: %v", r.Partition, err)
		}
		due[value] = r.Timestamp.Truncate(time.Millisecond).Add(4500 * time.Millisecond)
	}
	hopsInNew := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, level)
		if err != nil {
			t.Fatalf("list end offsets of %s: %v", level, err)
		}
		var inNew int64
		ends.Each(func(o kadm.ListedOffset) {
			if o.Partition >= 2 {
				inNew += o.Offset
			}
		})
		return inNew
	}
	n := 0
	for until := time.Now().Add(metadataMaxAge + 15*time.Second); n < 8*(2+added) || hopsInNew() == 0 && time.Now().Before(until); {
		for range 2 + added {
			send(n)
			n++
		}
		time.Sleep(time.Second) // the pace of the writer, not a wait for kdelay
	}
	// Without this the test would pass if kdelay never wrote to the new
	// level partitions.
	if hopsInNew() == 0 {
		t.Errorf("no hop was written to the %d partitions added to %s within %s", added, level, metadataMaxAge+15*time.Second)
	}

	got := arrived.Until(60*time.Second, atLeast(n+1))[1:]
	for value, k := range kafkatest.Values(got) {
		if k > 1 {
			t.Errorf("%s delivered %d times", value, k)
		}
	}
	for _, a := range got {
		if a.At.Before(due[string(a.Value)]) {
			t.Errorf("%s delivered %s before it was due", a.Value, due[string(a.Value)].Sub(a.At))
		}
	}
	if len(kafkatest.Values(got)) != n {
		t.Fatalf("%d of %d records delivered within 60s of the last being sent", len(kafkatest.Values(got)), n)
	}
}
