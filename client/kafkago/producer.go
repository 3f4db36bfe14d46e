package kafkago

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/internal/route"
)

// Producer sends delayed messages with a kafka-go Writer, straight into the
// level topic kdelay's ingress router would choose, saving that hop. It is
// safe for concurrent use.
type Producer struct {
	w    *kafka.Writer
	now  func() time.Time
	plan route.Planner
}

// NewProducer returns a Producer that writes with w, once the broker at
// w.Addr says that kdelay's ingress topic, the topic of each of cfg's
// levels and the control topic exist; see client.NewProducer for the check,
// its bound and how to skip it. It refuses a Writer that could lose messages
// without an error, or that has a Topic; see the package documentation for
// the settings to use.
func NewProducer(ctx context.Context, w *kafka.Writer, cfg client.ProducerConfig) (*Producer, error) {
	if err := checkWriter(w); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	plan := route.Planner{Topics: cfg.Topics, Levels: cfg.Levels, MaxDelay: cfg.MaxDelay, NewID: cfg.IDFunc}
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	if !cfg.SkipTopicCheck {
		err := route.CheckTopics(ctx, plan, cfg.TopicCheckTimeout, func(ctx context.Context, topics []string) ([]string, error) {
			return missingTopics(ctx, w, topics)
		})
		if err != nil {
			return nil, err
		}
	}
	return &Producer{w: w, now: cfg.NowFunc, plan: plan}, nil
}

func checkWriter(w *kafka.Writer) error {
	switch {
	case w == nil:
		return errors.New("writer: nil; pass a *kafka.Writer")
	case w.Topic != "":
		return fmt.Errorf("writer: Topic is %q; leave it empty: the producer names a topic per message, and kafka-go refuses that when the Writer has a Topic", w.Topic)
	case w.RequiredAcks == kafka.RequireNone:
		return errors.New("writer: RequiredAcks is none (kafka-go's default), so a lost write goes unnoticed; set RequiredAcks: kafka.RequireAll")
	case w.Async:
		return errors.New("writer: Async is true, so write errors are dropped; use a Writer with Async false")
	}
	return nil
}

// Send writes msg's key, value and headers to be delivered to target when it
// is due, waits for the write to be acknowledged, and returns the message's
// kdelay-id. It works as client.Producer.Send does: the due time is fixed
// once, from the current time; the message goes straight into the largest
// level that fits the time remaining, with the current time as its Time, or
// into the ingress topic below the smallest level; the id is client.WithID's
// if given, else msg's kdelay-id header, else a new one, and is returned on
// a write error too; WithHeaders adds headers after msg's; the routing
// headers msg carries are dropped; a message kdelay would dead-letter fails
// with kdelay's reason before anything is written. msg's Topic and Partition
// are ignored.
func (p *Producer) Send(ctx context.Context, target string, msg kafka.Message, when client.Delay, opts ...client.Option) (id string, err error) {
	m, id, err := p.message(target, msg, when, route.Apply(opts))
	if err != nil {
		return "", fmt.Errorf("send to %s %s: %w", target, when, err)
	}
	if err := p.w.WriteMessages(ctx, m); err != nil {
		err = first(err)
		if errors.Is(err, kafka.UnknownTopicOrPartition) {
			err = p.plan.Missing([]string{m.Topic}, err)
		}
		return id, fmt.Errorf("send %s to %s via %s: %w", id, target, m.Topic, err)
	}
	return id, nil
}

// message is the message Send writes.
func (p *Producer) message(target string, msg kafka.Message, when client.Delay, o route.Options) (kafka.Message, string, error) {
	if err := p.plan.CheckPrefix(o); err != nil {
		return kafka.Message{}, "", err
	}
	now := p.now()
	due, err := when.Due(now)
	if err != nil {
		return kafka.Message{}, "", err
	}
	pl, hs, err := route.Record(p.plan, target, msg.Headers, o, now, due)
	if err != nil {
		return kafka.Message{}, "", err
	}
	return kafka.Message{Topic: pl.Topic, Key: msg.Key, Value: msg.Value, Headers: hs, Time: pl.Timestamp, WriterData: msg.WriterData}, pl.ID, nil
}

// first unwraps the error of the one message in a kafka.WriteErrors, which
// does not unwrap itself.
func first(err error) error {
	var werr kafka.WriteErrors
	if errors.As(err, &werr) && len(werr) == 1 && werr[0] != nil {
		return werr[0]
	}
	return err
}
