package forwarder_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/forwarder/forwardertest"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

// BenchmarkForward writes b.N records, all due, to the ingress of a
// Forwarder on the in-process broker and waits until their target holds
// them all: what a record costs the whole path in one process (the writer,
// the broker, the Forwarder and its client), in time and in allocations.
// Everything but the Forwarder is the same from one build to the next, so
// two builds compare per record on a machine too noisy for the throughput
// benchmark's rates:
//
//	go test ./forwarder -run '^$' -bench Forward -benchtime 200000x -benchmem -count 6
func BenchmarkForward(b *testing.B) {
	cluster := kafkatest.New(b)
	name := kafkatest.Name(b)
	cluster.DeleteOnCleanup(name)
	target := name + ".target"
	cluster.CreateTopic(target, 3, nil)
	set, err := levels.Parse([]string{"1s"})
	if err != nil {
		b.Fatal(err)
	}
	topics := kdelay.Topics{Prefix: name}
	forwardertest.Serve(b, forwarder.Config{
		Brokers:    cluster.Brokers,
		Topics:     topics,
		Levels:     set,
		Group:      name,
		Partitions: 3,
		Logger:     slog.New(slog.DiscardHandler),
	})
	writer := cluster.Client(kgo.DefaultProduceTopic(topics.Ingress()))
	adm := kadm.NewClient(writer)
	value := make([]byte, 100)
	due := []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))

	b.ResetTimer()
	for range b.N {
		writer.Produce(context.Background(), &kgo.Record{Value: value, Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(target)},
			{Key: kdelay.HeaderDeliverAt, Value: due},
		}}, nil)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for delivered(b, adm, target) < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d records delivered after 5m", delivered(b, adm, target), b.N)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// delivered is how many records target holds.
func delivered(b *testing.B, adm *kadm.Client, target string) int64 {
	b.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), target)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}
