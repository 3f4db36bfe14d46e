package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client/internal/route"
)

// Cancel tells kdelay not to deliver the message with kdelay-id id, wherever
// it is in its hops. It writes a command to kdelay's control topic and
// returns once the broker has acknowledged it. It cannot undo a delivery
// already made: the target topic then holds the message with header
// kdelay-id, and kdelay logs command_unmatched (counted in
// kdelay_commands_total{result="unmatched"}) for a command that matched no record.
//
// The last command written for an id is the one in force: a Reschedule or
// RunNow after a Cancel un-cancels, a Cancel after them cancels.
func (p *Producer) Cancel(ctx context.Context, id string) error {
	return p.command(ctx, kdelay.CommandCancel, id, nil)
}

// Reschedule tells kdelay to deliver the message with kdelay-id id once, at
// the time when says, counted from now, and not at its old time, whether
// earlier or later. The new due time is checked as Send checks one: a
// negative delay or one beyond MaxDelay fails before anything is written.
// See Cancel for when a command takes effect.
func (p *Producer) Reschedule(ctx context.Context, id string, when Delay) error {
	return p.command(ctx, kdelay.CommandReschedule, id, when)
}

// RunNow tells kdelay to deliver the message with kdelay-id id at once, and
// not at its old time. See Cancel for when a command takes effect.
func (p *Producer) RunNow(ctx context.Context, id string) error {
	return p.command(ctx, kdelay.CommandRunNow, id, nil)
}

// command writes command name for id; when is Reschedule's, nil for the
// others.
func (p *Producer) command(ctx context.Context, name, id string, when route.When) error {
	c, hs, err := route.Command[kgo.RecordHeader](p.plan, name, id, when, p.now())
	if err != nil {
		return err
	}
	r := &kgo.Record{Topic: c.Topic, Key: c.Key, Value: c.Value, Headers: hs, Timestamp: c.Timestamp}
	if err := p.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			err = p.plan.Missing([]string{c.Topic}, err)
		}
		return fmt.Errorf("%s %q: write to %s: %w", name, id, c.Topic, err)
	}
	return nil
}
