package forwarder

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/kafkatest"
)

// The test of third_party/franz-go's header slab (source.go, headerSlab):
// the client decodes the headers of a batch's records into one slice and
// makes each header name a string once. Every record must still read as it
// was written, whatever its neighbours carry, and a record's headers must be
// its own: kdelay appends its headers to the user's, and an append that
// wrote into the next record's would change what that record says.
func TestFetchedHeadersAreEachRecords(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	topic := kafkatest.Name(t)
	cluster.DeleteOnCleanup(topic)
	cluster.CreateTopic(topic, 1, nil)

	h := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	// Names repeated, changed in place, fewer, more, none, and an empty
	// name and value, in one batch (a linger keeps them together).
	want := [][]kgo.RecordHeader{
		h("kdelay-target", "orders", "trace", "a"),
		h("kdelay-target", "invoices", "trace", "b"),
		h("kdelay-target", "orders", "span", "c"),
		h("kdelay-id", "x"),
		h("kdelay-id", "y", "trace", "d", "third", "e", "fourth", "f"),
		nil,
		h("", "", "trace", "g"),
		h("kdelay-target", "orders", "trace", "a"),
	}
	w := cluster.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rs []*kgo.Record
	for i, hs := range want {
		rs = append(rs, &kgo.Record{Value: []byte(fmt.Sprint(i)), Headers: hs})
	}
	if err := w.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	r := cluster.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []*kgo.Record
	for len(got) < len(want) {
		fs := r.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("%d of %d records read within a minute", len(got), len(want))
		}
		got = append(got, fs.Records()...)
	}
	// Append to each record's headers before reading the next: what
	// kdelay does to a record it forwards.
	for i, rec := range got {
		_ = append(rec.Headers, kgo.RecordHeader{Key: "appended", Value: []byte("z")})
		if !slices.EqualFunc(rec.Headers, want[i], headerEqual) {
			t.Errorf("record %d has headers %v, want %v", i, rec.Headers, want[i])
		}
	}
	for i, rec := range got {
		if !slices.EqualFunc(rec.Headers, want[i], headerEqual) {
			t.Errorf("after appending to the others, record %d has headers %v, want %v", i, rec.Headers, want[i])
		}
	}
}

func headerEqual(a, b kgo.RecordHeader) bool {
	return a.Key == b.Key && string(a.Value) == string(b.Value)
}
