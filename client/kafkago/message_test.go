package kafkago_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/kafkago"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestDelayed(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_790_000_000_123)
	for _, c := range []struct {
		name string
		when client.Delay
		want kafka.Header
	}{
		{"After is kdelay-delay in milliseconds", client.After(90 * time.Second), kafka.Header{Key: kdelay.HeaderDelay, Value: []byte("90000")}},
		{"At is kdelay-deliver-at in epoch milliseconds", client.At(at), kafka.Header{Key: kdelay.HeaderDeliverAt, Value: []byte("1790000000123")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := kafkago.Delayed("orders", []byte("k"), []byte("v"), c.when)
			want := []string{kdelay.HeaderTarget + "=orders", c.want.Key + "=" + string(c.want.Value)}
			if hs := headers(m); strings.Join(hs, ",") != strings.Join(want, ",") {
				t.Errorf("headers %q, want %q", hs, want)
			}
			if m.Topic != "kdelay.ingress" || string(m.Key) != "k" || string(m.Value) != "v" || !m.Time.IsZero() {
				t.Errorf("topic %q key %q value %q time %s, want kdelay.ingress, k, v and no time", m.Topic, m.Key, m.Value, m.Time)
			}
		})
	}
}

func headers(m kafka.Message) []string {
	var hs []string
	for _, h := range m.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	return hs
}

func TestNewProducerRefuses(t *testing.T) {
	t.Parallel()
	good := func() *kafka.Writer {
		return &kafka.Writer{Addr: kafka.TCP("localhost:9092"), RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	}
	for _, c := range []struct {
		name string
		w    func(*kafka.Writer) *kafka.Writer
		want string
	}{
		{"no writer", func(*kafka.Writer) *kafka.Writer { return nil }, "pass a *kafka.Writer"},
		{"a writer with a Topic", func(w *kafka.Writer) *kafka.Writer { w.Topic = "orders"; return w }, "leave it empty"},
		{"kafka-go's default RequiredAcks", func(w *kafka.Writer) *kafka.Writer { w.RequiredAcks = kafka.RequireNone; return w }, "kafka.RequireAll"},
		{"an async writer", func(w *kafka.Writer) *kafka.Writer { w.Async = true; return w }, "Async false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := kafkago.NewProducer(c.w(good()), client.ProducerConfig{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewProducer: %v, want an error saying %q", err, c.want)
			}
		})
	}
	if _, err := kafkago.NewProducer(good(), client.ProducerConfig{}); err != nil {
		t.Errorf("NewProducer with the documented settings: %v", err)
	}
}

func TestSendRefuses(t *testing.T) {
	t.Parallel()
	p, err := kafkago.NewProducer(&kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), RequiredAcks: kafka.RequireAll}, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, target string
		when         client.Delay
		want         string
	}{
		{"an empty target", "", client.After(time.Second), "target is empty"},
		{"a negative delay", "orders", client.After(-time.Second), "negative delay"},
		{"kdelay's own topic", "kdelay.ingress", client.After(time.Second), "kdelay's own topics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := p.Send(context.Background(), c.target, kafka.Message{}, c.when); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Send: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

func TestIdempotent(t *testing.T) {
	t.Parallel()
	calls := map[string]int{}
	handle := kafkago.Idempotent(client.NewMemoryStore(10, time.Hour), func(_ context.Context, m kafka.Message) error {
		calls[string(m.Value)]++
		return nil
	})
	msg := func(value, id string) kafka.Message {
		m := kafka.Message{Value: []byte(value)}
		if id != "" {
			m.Headers = []kafka.Header{{Key: kdelay.HeaderID, Value: []byte(id)}}
		}
		return m
	}
	for _, m := range []kafka.Message{msg("a", "1"), msg("a", "1"), msg("b", "2"), msg("none", ""), msg("none", "")} {
		if err := handle(context.Background(), m); err != nil {
			t.Fatalf("handle: %v", err)
		}
	}
	if calls["a"] != 1 || calls["b"] != 1 || calls["none"] != 2 {
		t.Errorf("handled %v, want a and b once (duplicate skipped), none twice (no kdelay-id)", calls)
	}
}
