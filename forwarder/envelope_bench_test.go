package forwarder

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// BenchmarkRouteRecord is the per-record work of routing a due ingress
// record: parse it and build the record delivered. Its allocations are most
// of what `kdelay serve` allocates per record (docs/BENCHMARKS.md).
func BenchmarkRouteRecord(b *testing.B) {
	rules := kdelay.Rules{Topics: kdelay.Topics{Prefix: "kdelay"}}
	due := []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))
	for _, c := range []struct {
		name    string
		headers []kgo.RecordHeader
	}{
		// As a producer with kcat writes: kdelay gives the id.
		{"delay, no id", []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte("bench.target")},
			{Key: kdelay.HeaderDelay, Value: []byte("0")},
			{Key: "trace", Value: []byte("abc")},
		}},
		// As the client library and `kdelay bench` write them.
		{"deliver-at and id", []kgo.RecordHeader{
			{Key: kdelay.HeaderID, Value: []byte("0123456789abcdef")},
			{Key: kdelay.HeaderDeliverAt, Value: due},
			{Key: kdelay.HeaderTarget, Value: []byte("bench.target")},
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := &kgo.Record{
				Topic: "kdelay.ingress", Partition: 3, Offset: 123456789, Timestamp: time.Now(),
				Value: make([]byte, 100), Headers: c.headers,
			}
			b.ReportAllocs()
			for b.Loop() {
				env, err := parse(r, rules)
				if err != nil {
					b.Fatal(err)
				}
				if out := env.delivery(new(kgo.Record)); out.Topic != "bench.target" {
					b.Fatal(out.Topic)
				}
			}
		})
	}
}
