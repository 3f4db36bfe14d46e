package kafkago

import (
	"context"
	"errors"
	"fmt"

	"github.com/segmentio/kafka-go"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/internal/route"
)

// Cancel tells kdelay not to deliver the message with kdelay-id id. It
// writes the same command record as client.Producer.Cancel, which says what
// a command does and when it cannot: a delivery already made is not undone.
func (p *Producer) Cancel(ctx context.Context, id string) error {
	return p.command(ctx, kdelay.CommandCancel, id, nil)
}

// Reschedule tells kdelay to deliver the message with kdelay-id id once, at
// the time when says, and not at its old time; see
// client.Producer.Reschedule.
func (p *Producer) Reschedule(ctx context.Context, id string, when client.Delay) error {
	return p.command(ctx, kdelay.CommandReschedule, id, when)
}

// RunNow tells kdelay to deliver the message with kdelay-id id at once, and
// not at its old time; see client.Producer.RunNow.
func (p *Producer) RunNow(ctx context.Context, id string) error {
	return p.command(ctx, kdelay.CommandRunNow, id, nil)
}

// command writes command name for id; when is Reschedule's, nil for the
// others.
func (p *Producer) command(ctx context.Context, name, id string, when route.When) error {
	c, hs, err := route.Command[kafka.Header](p.plan, name, id, when, p.now())
	if err != nil {
		return err
	}
	m := kafka.Message{Topic: c.Topic, Key: c.Key, Value: c.Value, Headers: hs, Time: c.Timestamp}
	if err := p.w.WriteMessages(ctx, m); err != nil {
		err = first(err)
		if errors.Is(err, kafka.UnknownTopicOrPartition) {
			err = p.plan.Missing([]string{c.Topic}, err)
		}
		return fmt.Errorf("%s %q: write to %s: %w", name, id, c.Topic, err)
	}
	return nil
}
