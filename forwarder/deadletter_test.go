package forwarder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestDeadLetters sends every kind of bad record through the ingress and
// checks each reaches the DLQ with its original key, value and headers, a
// reason that says what to fix, and where it came from; and that the good
// record sent after them is still delivered.
//
// In exactly-once delivery, a refused record is dead-lettered in the
// transaction it failed in, which still commits: each dead letter is seen
// once, and no transaction is aborted for it.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	for _, delivery := range []Delivery{AtLeastOnce, ExactlyOnce} {
		t.Run(string(delivery), func(t *testing.T) {
			t.Parallel()
			testDeadLetters(t, delivery)
		})
	}
}

func testDeadLetters(t *testing.T, delivery Delivery) {
	fx := setup(t, []string{"1s", "2s"})
	tooBig := fx.target + ".small"
	fx.cluster.CreateTopic(tooBig, 1, map[string]*string{"max.message.bytes": ptr("2000")})
	cfg := fx.cfg
	cfg.Delivery = delivery
	cfg.InstanceID = kafkatest.Name(t)
	f, _ := fx.start(cfg)
	readCommitted := kgo.FetchIsolationLevel(kgo.ReadCommitted())

	cases := []struct {
		name    string
		value   string
		headers []string
		reason  string
	}{
		{"missing target", "a", []string{kdelay.HeaderDelay, "1s"}, "kdelay-target is missing"},
		{"empty target", "b", []string{kdelay.HeaderTarget, "", kdelay.HeaderDelay, "1s"}, "kdelay-target is missing"},
		{"target is kdelay's own topic", "c", []string{kdelay.HeaderTarget, fx.cfg.Topics.Ingress(), kdelay.HeaderDelay, "1s"}, "kdelay's own topic"},
		{"both delay headers", "d", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "1s", kdelay.HeaderDeliverAt, "1795000000000"}, "set exactly one"},
		{"neither delay header", "e", []string{kdelay.HeaderTarget, fx.target}, "neither kdelay-delay nor kdelay-deliver-at"},
		{"unparsable delay", "f", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "soon"}, `"soon" is neither integer milliseconds nor a Go duration`},
		{"unparsable time", "g", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDeliverAt, "tomorrow 8am"}, "neither unix epoch milliseconds nor RFC 3339"},
		{"negative delay", "h", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "-5s"}, "is negative"},
		{"delay overflows", "i", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "99999999999999999999"}, "overflows"},
		{"time overflows", "j", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDeliverAt, "99999999999999999999"}, "overflows"},
		{"delay above max-delay", "k", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "9601h"}, "more than the maximum delay"},
		{"time above max-delay", "l", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDeliverAt, "2999-01-01T00:00:00Z"}, "more than the maximum delay"},
		{"header twice", "m", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderTarget, "x", kdelay.HeaderDelay, "1s"}, "appears 2 times"},
		{"target does not exist", "n", []string{kdelay.HeaderTarget, fx.target + ".missing", kdelay.HeaderDelay, "0"}, "does not exist"},
		{"target name invalid", "o", []string{kdelay.HeaderTarget, "no spaces allowed", kdelay.HeaderDelay, "0"}, "not a valid topic name"},
		{"target name too long", "q", []string{kdelay.HeaderTarget, strings.Repeat("t", 250), kdelay.HeaderDelay, "0"}, "not a valid topic name"},
		// 3s: through 2s, then 1s or held (holdInstead) the last second,
		// refused as it leaves, unless the ingress routes it 3s late; 1.2s
		// once came out of the ingress, past due, on a loaded machine.
		{"too large for target", incompressible(5000), []string{kdelay.HeaderTarget, tooBig, kdelay.HeaderDelay, "3000"}, "larger than topic"},
	}
	sent := map[string]string{} // value → source
	for _, c := range cases {
		r := fx.send(c.value, append([]string{"user", c.name}, c.headers...)...)
		sent[c.value] = fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
	}
	fx.send("good", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "1500")

	dlq := fx.cluster.Collect(fx.cfg.Topics.DLQ(), readCommitted)
	dead := dlq.Until(60*time.Second, atLeast(len(cases)))
	byValue := map[string]kafkatest.Arrival{}
	for _, a := range dead {
		byValue[string(a.Value)] = a
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok := byValue[c.value]
			if !ok {
				t.Fatalf("not in the DLQ (%d records there)", len(dead))
			}
			reason, _ := kafkatest.Header(a.Record, kdelay.HeaderError)
			if !strings.Contains(reason, c.reason) {
				t.Errorf("%s = %q, want it to contain %q", kdelay.HeaderError, reason, c.reason)
			}
			src, _ := kafkatest.Header(a.Record, kdelay.HeaderSource)
			want := append([]string{"user", c.name}, c.headers...)
			if c.name == "too large for target" {
				// Refused at delivery, after a hop: it comes from the level
				// topic as it was there, still carrying its id, due time and
				// target, so it can be replayed to the ingress as is.
				if !strings.HasPrefix(src, fx.cfg.Topics.Level("1s")+"/") && !strings.HasPrefix(src, fx.cfg.Topics.Level("2s")+"/") {
					t.Errorf("%s = %q, want a place in %s or %s", kdelay.HeaderSource, src, fx.cfg.Topics.Level("1s"), fx.cfg.Topics.Level("2s"))
				}
				id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
				if id != sent[c.value] {
					t.Errorf("%s = %q, want the ingress place %q", kdelay.HeaderID, id, sent[c.value])
				}
				want = []string{"user", c.name, kdelay.HeaderID, id}
			} else if src != sent[c.value] {
				t.Errorf("%s = %q, want %q", kdelay.HeaderSource, src, sent[c.value])
			}
			// The record's headers come first, unchanged and in order.
			for i := 0; i < len(want); i += 2 {
				h := a.Headers[i/2]
				if h.Key != want[i] || string(h.Value) != want[i+1] {
					t.Errorf("header %d = %s=%s, want %s=%s", i/2, h.Key, h.Value, want[i], want[i+1])
				}
			}
		})
	}
	if got := fx.cluster.Collect(fx.target, readCommitted).Until(30*time.Second, atLeast(1)); len(got) != 1 || string(got[0].Value) != "good" {
		t.Errorf("target has %d records after the bad ones, want the good one: a bad record blocked the partition", len(got))
	}
	if n := len(dlq.Arrivals()); n != len(cases) {
		t.Errorf("%d dead letters for %d bad records, want one each", n, len(cases))
	}
	if n := f.Stats().Aborted; n > 0 {
		t.Errorf("%d transactions aborted, want none: a refused record is dead-lettered in its transaction", n)
	}
}

// incompressible returns n random letters: brokers measure the compressed
// batch against max.message.bytes.
func incompressible(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(rand.IntN(26))
	}
	return string(b)
}

// TestDeadLetterFits checks that a dead letter always fits the DLQ's limit,
// keeps its reason, source and as much of the record as fits, in order, and
// says in kdelay-truncated what was cut.
func TestDeadLetterFits(t *testing.T) {
	t.Parallel()
	src := func(key, value int, headers ...int) *kgo.Record {
		r := &kgo.Record{Topic: "kdelay.ingress", Partition: 2, Offset: 7,
			Key: []byte(strings.Repeat("k", key)), Value: []byte(incompressible(value))}
		for i, n := range headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: fmt.Sprint("h", i), Value: []byte(strings.Repeat("v", n))})
		}
		return r
	}
	tests := []struct {
		name      string
		src       *kgo.Record
		limit     int
		truncated string // "" for none; a prefix when kept sizes depend on the overhead
		headers   int    // own headers kept
	}{
		{"fits whole", src(10, 1000, 5), 2000, "", 1},
		{"value cut", src(10, 1_000_100, 5), 1_000_012, "value=1000100/", 1},
		{"value dropped, key cut", src(3000, 3000, 5), 2000, "value=3000/0,key=3000/", 1},
		{"own headers dropped from the last", src(0, 10, 100, 3000, 3000), 2000, "value=10/0,headers=6106/102", 1},
		{"every own header dropped", src(0, 0, 3000), 1000, "headers=3002/0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := deadLetterRecord("dlq", tt.src, "too large", tt.limit)
			if size := recordBytes(got.Key, got.Value, got.Headers) + batchOverhead; size > tt.limit {
				t.Errorf("dead letter takes %d bytes, more than the limit %d", size, tt.limit)
			}
			if !bytes.HasPrefix(tt.src.Value, got.Value) || !bytes.HasPrefix(tt.src.Key, got.Key) {
				t.Errorf("key and value are not the first bytes of the original's")
			}
			cut := headerValue(got, kdelay.HeaderTruncated)
			if (tt.truncated == "") != (cut == "") || !strings.HasPrefix(cut, tt.truncated) {
				t.Errorf("%s = %q, want %q…", kdelay.HeaderTruncated, cut, tt.truncated)
			}
			if tt.truncated == "value=1000100/" && len(got.Value) < 999_000 {
				t.Errorf("kept %d bytes of the value, want all but the overhead of the %d-byte limit", len(got.Value), tt.limit)
			}
			want := append(slices.Clone(tt.src.Headers[:tt.headers]),
				kgo.RecordHeader{Key: kdelay.HeaderError, Value: []byte("too large")},
				kgo.RecordHeader{Key: kdelay.HeaderSource, Value: []byte("kdelay.ingress/2/7")})
			if n := len(want); len(got.Headers) < n || !reflect.DeepEqual(got.Headers[:n], want) {
				t.Errorf("headers %v, want the record's first %d, then %s and %s", names(got.Headers), tt.headers, kdelay.HeaderError, kdelay.HeaderSource)
			}
		})
	}
}

func names(hs []kgo.RecordHeader) []string {
	var s []string
	for _, h := range hs {
		s = append(s, h.Key)
	}
	return s
}

// TestLargeRecord sends a record the ingress takes but a level does not (it
// is over the client's 1,000,012-byte batch limit, under the broker's
// 1,048,588) and checks it lands in the DLQ cut to fit, that the records
// behind it are delivered, and that it does not hold back the commit: a
// clean restart would re-deliver nothing.
func TestLargeRecord(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	_, stop := fx.start(fx.cfg)
	big := fx.cluster.Client(kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(1_048_588), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := incompressible(1_000_100)
	r := &kgo.Record{Topic: fx.cfg.Topics.Ingress(), Key: []byte("k"), Value: []byte(value), Headers: []kgo.RecordHeader{
		{Key: "user", Value: []byte("big")},
		{Key: kdelay.HeaderTarget, Value: []byte(fx.target)},
		{Key: kdelay.HeaderDelay, Value: []byte("1200")},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := big.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce a %d-byte record to the ingress: %v", len(value), err)
	}
	const n = 20
	for i := range n {
		r := &kgo.Record{Topic: fx.cfg.Topics.Ingress(), Key: []byte("k"), Value: []byte(strconv.Itoa(i)), Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(fx.target)}, {Key: kdelay.HeaderDelay, Value: []byte("0")}}}
		if err := fx.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	dead := fx.cluster.Collect(fx.cfg.Topics.DLQ()).Until(30*time.Second, atLeast(1))
	if len(dead) != 1 {
		t.Fatalf("%d records in the DLQ within 30s, want the large one", len(dead))
	}
	d := dead[0]
	if reason := headerValue(d.Record, kdelay.HeaderError); !strings.Contains(reason, "larger than topic") {
		t.Errorf("%s = %q, want it to say the record is too large", kdelay.HeaderError, reason)
	}
	if src, want := headerValue(d.Record, kdelay.HeaderSource), source(r); src != want {
		t.Errorf("%s = %q, want %q", kdelay.HeaderSource, src, want)
	}
	if got := headerValue(d.Record, "user"); got != "big" {
		t.Errorf("header user = %q, want the record's own header kept", got)
	}
	if !strings.HasPrefix(value, string(d.Value)) || len(d.Value) < 990_000 {
		t.Errorf("dead letter value has %d bytes, want the first bytes of the original, all but what the limit cuts", len(d.Value))
	}
	if cut, want := headerValue(d.Record, kdelay.HeaderTruncated), fmt.Sprintf("value=%d/%d", len(value), len(d.Value)); cut != want {
		t.Errorf("%s = %q, want %q", kdelay.HeaderTruncated, cut, want)
	}
	if got := fx.cluster.Collect(fx.target).Until(30*time.Second, atLeast(n)); len(got) != n {
		t.Errorf("%d of the %d records behind the large one delivered within 30s", len(got), n)
	}
	stop()
	if ok, committed, end := fx.committedAll(stageGroup(fx.cfg, fx.cfg.Topics.Ingress()), fx.cfg.Topics.Ingress(), 10*time.Second); !ok {
		t.Errorf("after a clean stop the ingress group committed %v, want the end offsets %v: a restart would deliver again", committed, end)
	}
}

// lowerMaxMessageBytes sets the topic's max.message.bytes and returns once
// the broker refuses a record larger than it. Apache Kafka applies a config
// change when the broker reads it from the metadata log, a moment after
// AlterConfigs returns (CI once saw a 50,000-byte record taken after the
// change to 10,000 had been acknowledged). Probes the broker still took are in
// the topic; they carry the header "probe".
func lowerMaxMessageBytes(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: ptr(strconv.Itoa(n))}}, topic)
	if err == nil {
		_, err = resp.On(topic, nil)
	}
	if err != nil {
		t.Fatalf("lower max.message.bytes of %s: %v", topic, err)
	}
	probe := &kgo.Record{Topic: topic, Value: []byte(incompressible(2 * n)), Headers: []kgo.RecordHeader{{Key: "probe"}}}
	for {
		err := cl.ProduceSync(ctx, probe).FirstErr()
		if errors.Is(err, kerr.MessageTooLarge) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%s still takes a record of %d bytes 30s after max.message.bytes was set to %d (last produce: %v)", topic, 2*n, n, err)
		}
		select { // the broker applies the change from its metadata log: poll
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestDeadLetterShrinks lowers the DLQ's max.message.bytes after kdelay has
// read it and checks that a dead letter the broker then refuses as too large
// is cut until it fits, rather than retried as it is for ever.
func TestDeadLetterShrinks(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	fx.start(fx.cfg)
	lowerMaxMessageBytes(t, fx.cl, fx.cfg.Topics.DLQ(), 10_000)
	value := incompressible(50_000)
	sent := fx.send(value, kdelay.HeaderDelay, "1s") // no target: dead-lettered

	fromSent := func(a kafkatest.Arrival) bool { return headerValue(a.Record, kdelay.HeaderSource) == source(sent) }
	dead := fx.cluster.Collect(fx.cfg.Topics.DLQ()).Until(60*time.Second, func(got []kafkatest.Arrival) bool {
		return slices.ContainsFunc(got, fromSent)
	})
	dead = slices.DeleteFunc(dead, func(a kafkatest.Arrival) bool { return !fromSent(a) }) // drop the probes
	if len(dead) != 1 {
		t.Fatalf("%d dead letters from %s within 60s, want the one refused as too large", len(dead), source(sent))
	}
	d := dead[0]
	if !strings.HasPrefix(value, string(d.Value)) || len(d.Value) > 10_000 {
		t.Errorf("dead letter value has %d bytes, want at most the first 10000 of the original", len(d.Value))
	}
	if cut, want := headerValue(d.Record, kdelay.HeaderTruncated), fmt.Sprintf("value=%d/%d", len(value), len(d.Value)); cut != want {
		t.Errorf("%s = %q, want %q", kdelay.HeaderTruncated, cut, want)
	}
}
