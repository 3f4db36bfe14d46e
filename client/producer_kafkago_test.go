package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/kafkago"
	"github.com/kdelay/kdelay/kafkatest"
)

// The kafka-go producer lives in package kafkago; its end-to-end test is
// here, to share the fixture and the checks with franz-go's.
func TestKafkaGoProducer(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	w := fx.writer()
	p, err := kafkago.NewProducer(context.Background(), w, fx.cfg)
	if err != nil {
		t.Fatalf("kafkago.NewProducer: %v", err)
	}
	sends := fx.sendThrough(func(ctx context.Context, target string, m message, when client.Delay) (string, error) {
		msg := kafka.Message{Key: m.key, Value: m.value, Headers: kafkaHeaders(m.headers)}
		var opts []client.Option
		if m.extra != nil {
			opts = append(opts, kafkago.WithHeaders(kafkaHeaders(m.extra)...))
		}
		if m.id != "" {
			opts = append(opts, client.WithID(m.id))
		}
		return p.Send(ctx, target, msg, when, opts...)
	})
	t.Run("a kafka.Reader handles each once through Idempotent", func(t *testing.T) {
		fx.readIdempotent(t, sends)
	})
}

func kafkaHeaders(hs [][2]string) []kafka.Header {
	var khs []kafka.Header
	for _, h := range hs {
		khs = append(khs, kafka.Header{Key: h[0], Value: []byte(h[1])})
	}
	return khs
}

// A wrong prefix fails kafkago.NewProducer, naming the topics the server
// must have.
func TestKafkaGoProducerWrongPrefix(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	cfg := fx.cfg
	cfg.Topics.Prefix = "wrong"
	_, err := kafkago.NewProducer(context.Background(), fx.writer(), cfg)
	want := `topics wrong.ingress, wrong.level.1s, wrong.level.2s, wrong.control do not exist: is kdelay running with topic prefix "wrong" and levels [1s 2s]?`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("kafkago.NewProducer: %v, want an error saying %q", err, want)
	}
}

// readIdempotent reads the target with a kafka.Reader in a group and hands
// every message to an Idempotent handler twice, as a redelivery would.
func (fx *fixture) readIdempotent(t *testing.T, sends []sent) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: fx.cluster.Brokers, GroupID: kafkatest.Name(t), Topic: fx.target,
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond,
	})
	defer func() {
		if err := r.Close(); err != nil {
			t.Errorf("close reader: %v", err)
		}
	}()
	handled := map[string]int{}
	handle := kafkago.Idempotent(client.NewMemoryStore(100, time.Hour), func(_ context.Context, m kafka.Message) error {
		id, _ := kafkago.ID(m)
		handled[id]++
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for range sends {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("FetchMessage: %v", err)
		}
		for range 2 {
			if err := handle(ctx, m); err != nil {
				t.Fatalf("handle: %v", err)
			}
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("CommitMessages: %v", err)
		}
	}
	for _, s := range sends {
		if handled[s.id] != 1 {
			t.Errorf("%s: handled %d times, want once", s.name, handled[s.id])
		}
	}
}

// writer is a kafka-go Writer to the fixture's broker; see writerTo.
func (fx *fixture) writer() *kafka.Writer { return writerTo(fx.t, fx.cluster.Brokers...) }

// writerTo is a kafka-go Writer with the settings package kafkago documents,
// closed with its connections when the test ends.
func writerTo(t *testing.T, brokers ...string) *kafka.Writer {
	tr := &kafka.Transport{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
		Balancer:     &kafka.Hash{},
		Transport:    tr,
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Errorf("close writer: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return w
}
