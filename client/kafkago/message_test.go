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
		name  string
		when  client.Delay
		opts  []client.Option
		topic string
		want  []string
	}{
		{"After is kdelay-delay in milliseconds", client.After(90 * time.Second), nil, "kdelay.ingress",
			[]string{kdelay.HeaderTarget + "=orders", kdelay.HeaderDelay + "=90000"}},
		{"At is kdelay-deliver-at in epoch milliseconds", client.At(at), nil, "kdelay.ingress",
			[]string{kdelay.HeaderTarget + "=orders", kdelay.HeaderDeliverAt + "=1790000000123"}},
		{"options set headers, id and prefix", client.After(time.Second),
			[]client.Option{kafkago.WithHeaders(kafka.Header{Key: "a", Value: []byte("1")}), client.WithID("id-1"), client.WithTopicPrefix("payments")},
			"payments.ingress", []string{"a=1", kdelay.HeaderID + "=id-1", kdelay.HeaderTarget + "=orders", kdelay.HeaderDelay + "=1000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := kafkago.Delayed("orders", []byte("k"), []byte("v"), c.when, c.opts...)
			if hs := headers(m); strings.Join(hs, ",") != strings.Join(c.want, ",") {
				t.Errorf("headers %q, want %q", hs, c.want)
			}
			if m.Topic != c.topic || string(m.Key) != "k" || string(m.Value) != "v" || !m.Time.IsZero() {
				t.Errorf("topic %q key %q value %q time %s, want %s, k, v and no time", m.Topic, m.Key, m.Value, m.Time, c.topic)
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
			_, err := kafkago.NewProducer(context.Background(), c.w(good()), client.ProducerConfig{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewProducer: %v, want an error saying %q", err, c.want)
			}
		})
	}
	if _, err := kafkago.NewProducer(context.Background(), good(), client.ProducerConfig{SkipTopicCheck: true}); err != nil {
		t.Errorf("NewProducer with the documented settings: %v", err)
	}
	t.Run("a broker it cannot reach", func(t *testing.T) {
		tr := &kafka.Transport{}
		t.Cleanup(tr.CloseIdleConnections)
		w := &kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), RequiredAcks: kafka.RequireAll, Transport: tr}
		_, err := kafkago.NewProducer(context.Background(), w, client.ProducerConfig{TopicCheckTimeout: 200 * time.Millisecond})
		if want := "is the broker reachable? Set ProducerConfig.SkipTopicCheck"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewProducer: %v, want an error saying %q", err, want)
		}
	})
}

func TestSendRefuses(t *testing.T) {
	t.Parallel()
	p, err := kafkago.NewProducer(context.Background(), &kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), RequiredAcks: kafka.RequireAll}, client.ProducerConfig{SkipTopicCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, target string
		when         client.Delay
		opts         []client.Option
		want         string
	}{
		{"an empty target", "", client.After(time.Second), nil, "header kdelay-target is missing"},
		{"an invalid target name", "orders/eu", client.After(time.Second), nil, "is not a valid topic name"},
		{"kdelay's own topic", "kdelay.ingress", client.After(time.Second), nil, "names kdelay's own topic"},
		{"a delay beyond the maximum", "orders", client.After(401 * 24 * time.Hour), nil, "more than the maximum delay"},
		{"an empty WithID", "orders", client.After(time.Second), []client.Option{client.WithID("")}, "header kdelay-id is empty"},
		{"an empty kdelay-id header", "orders", client.After(time.Second), []client.Option{kafkago.WithHeaders(kafka.Header{Key: kdelay.HeaderID})}, "header kdelay-id is empty"},
		{"a negative delay", "orders", client.After(-time.Second), nil, "negative delay"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := p.Send(context.Background(), c.target, kafka.Message{}, c.when, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
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
