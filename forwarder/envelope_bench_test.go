package forwarder

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// BenchmarkRouteRecord is the per-record work of routing a due ingress
// record as `kdelay bench` writes them (no kdelay-id, a delay, 100 bytes):
// parse it and build the record delivered. Its allocations are most of
// what `kdelay serve` allocates per record (docs/BENCHMARKS.md).
func BenchmarkRouteRecord(b *testing.B) {
	rules := kdelay.Rules{Topics: kdelay.Topics{Prefix: "kdelay"}}
	r := &kgo.Record{
		Topic: "kdelay.ingress", Partition: 3, Offset: 123456789, Timestamp: time.Now(),
		Value: make([]byte, 100),
		Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte("bench.target")},
			{Key: kdelay.HeaderDelay, Value: []byte("0")},
			{Key: "trace", Value: []byte("abc")},
		},
	}
	b.ReportAllocs()
	for b.Loop() {
		env, err := parse(r, rules)
		if err != nil {
			b.Fatal(err)
		}
		if out := env.delivery(); out.Topic != "bench.target" {
			b.Fatal(out.Topic)
		}
	}
}
