package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/kafkago"
	"github.com/kdelay/kdelay/kafkatest"
)

func TestDelayed(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_790_000_000_123).Add(400 * time.Microsecond)
	target := kdelay.HeaderTarget + "=orders"
	for _, c := range []struct {
		name  string
		when  client.Delay
		opts  []client.Option
		topic string
		want  []string
	}{
		{"After is kdelay-delay in milliseconds", client.After(90 * time.Second), nil, "kdelay.ingress", []string{target, kdelay.HeaderDelay + "=90000"}},
		{"After rounds up to the millisecond", client.After(1500 * time.Microsecond), nil, "kdelay.ingress", []string{target, kdelay.HeaderDelay + "=2"}},
		{"After(0) is due at once", client.After(0), nil, "kdelay.ingress", []string{target, kdelay.HeaderDelay + "=0"}},
		{"At is kdelay-deliver-at in epoch milliseconds, rounded up", client.At(at), nil, "kdelay.ingress", []string{target, kdelay.HeaderDeliverAt + "=1790000000124"}},
		{"WithHeaders come first, in order", client.After(time.Second),
			[]client.Option{client.WithHeaders(kgo.RecordHeader{Key: "b", Value: []byte("2")}), client.WithHeaders(kgo.RecordHeader{Key: "a", Value: []byte("1")})},
			"kdelay.ingress", []string{"b=2", "a=1", target, kdelay.HeaderDelay + "=1000"}},
		{"WithID sets kdelay-id", client.After(time.Second), []client.Option{client.WithID("order-42")},
			"kdelay.ingress", []string{kdelay.HeaderID + "=order-42", target, kdelay.HeaderDelay + "=1000"}},
		{"WithTopicPrefix names the server's ingress", client.After(time.Second), []client.Option{client.WithTopicPrefix("payments")},
			"payments.ingress", []string{target, kdelay.HeaderDelay + "=1000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := client.Delayed("orders", []byte("k"), []byte("v"), c.when, c.opts...)
			if hs := headers(r); !slices.Equal(hs, c.want) {
				t.Errorf("headers %q, want %q", hs, c.want)
			}
			if r.Topic != c.topic || string(r.Key) != "k" || string(r.Value) != "v" {
				t.Errorf("topic %q key %q value %q, want %s, k, v", r.Topic, r.Key, r.Value, c.topic)
			}
			if !r.Timestamp.IsZero() {
				t.Errorf("timestamp %s, want zero for kgo to set when producing", r.Timestamp)
			}
		})
	}
}

func TestDelayDue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 8, 0, 0, 250_000, time.UTC) // 0.25ms past the second
	for _, c := range []struct {
		name string
		when client.Delay
		want time.Time
	}{
		{"After counts from now, rounded up to the millisecond", client.After(time.Second), time.Date(2026, 11, 22, 8, 0, 1, 1_000_000, time.UTC)},
		{"zero Delay is now", client.Delay{}, time.Date(2026, 11, 22, 8, 0, 0, 1_000_000, time.UTC)},
		{"At a whole millisecond is that time", client.At(now.Add(-250 * time.Microsecond)), now.Add(-250 * time.Microsecond)},
		{"At in the past stays in the past", client.At(now.Add(-time.Hour)), time.Date(2026, 11, 22, 7, 0, 0, 1_000_000, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.when.Due(now)
			if err != nil || !got.Equal(c.want) {
				t.Errorf("%s.Due(%s) = %s, %v; want %s", c.when, now, got, err, c.want)
			}
		})
	}
	for _, when := range []client.Delay{client.After(-time.Millisecond), client.At(time.Time{})} {
		if _, err := when.Due(now); err == nil {
			t.Errorf("%s.Due: no error, want one", when)
		}
	}
}

func TestID(t *testing.T) {
	t.Parallel()
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: kdelay.HeaderID, Value: []byte("id-1")}}}
	if id, ok := client.ID(r); id != "id-1" || !ok {
		t.Errorf("ID = %q, %v; want id-1, true", id, ok)
	}
	if id, ok := client.ID(&kgo.Record{}); id != "" || ok {
		t.Errorf("ID of a record without %s = %q, %v; want \"\", false", kdelay.HeaderID, id, ok)
	}
}

// Delayed records with options reach the target through a running kdelay
// server, from franz-go and kafka-go alike: on the server's prefix, with
// their headers in order and their id, not before they are due.
func TestDelayedThroughServer(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	prefix := client.WithTopicPrefix(fx.cfg.Topics.Prefix)
	delay := 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	before := time.Now()
	r := client.Delayed(fx.target, []byte("k1"), []byte("v1"), client.After(delay), prefix,
		client.WithID("franz-1"), client.WithHeaders(kgo.RecordHeader{Key: "trace", Value: []byte("t1")}))
	if err := fx.cluster.Client().ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", r.Topic, err)
	}
	m := kafkago.Delayed(fx.target, []byte("k2"), []byte("v2"), client.After(delay), prefix,
		client.WithID("kafkago-1"), kafkago.WithHeaders(kafka.Header{Key: "trace", Value: []byte("t2")}))
	if err := fx.writer().WriteMessages(ctx, m); err != nil {
		t.Fatalf("write %s: %v", m.Topic, err)
	}

	got := byID(fx.cluster.Collect(fx.target).Until(20*time.Second, func(got []kafkatest.Arrival) bool { return len(byID(got)) >= 2 }))
	for _, c := range []struct{ id, trace string }{{"franz-1", "t1"}, {"kafkago-1", "t2"}} {
		as := got[c.id]
		if len(as) != 1 {
			t.Errorf("%s: %d records on the target, want 1", c.id, len(as))
			continue
		}
		due := kafkatest.DeliverAt(t, as[0].Record)
		want := []string{"trace=" + c.trace, kdelay.HeaderID + "=" + c.id, kdelay.HeaderDeliverAt + "=" + kdelay.FormatDeliverAt(due)}
		if hs := headers(as[0].Record); !slices.Equal(hs, want) {
			t.Errorf("%s: headers %q, want %q", c.id, hs, want)
		}
		if due.Before(before.Add(delay).Truncate(time.Millisecond)) || as[0].At.Before(due) {
			t.Errorf("%s: due %s, arrived %s; want due at least %s after %s, and not arriving before it", c.id, due, as[0].At, delay, before)
		}
	}
}
