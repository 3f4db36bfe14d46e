package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/schedule"
)

// Schedule creates the recurring schedule id, or replaces the one with that
// id: kdelay delivers rec's value and headers to f.Target at each
// occurrence of f.Spec in f.TimeZone (docs/SCHEDULES.md), with kdelay-id
// "<id>@<occurrence time in UTC, RFC 3339>" and rec's key replaced by id. It
// checks the schedule as kdelay will, writes it to the schedules topic and
// returns once the broker has acknowledged it. A replacement cancels the
// occurrences already written and not yet due that it does not have.
//
// cl must use Kafka's default partitioner (franz-go's default does): kdelay
// refuses a schedule found in another partition than its key's.
func (p *Producer) Schedule(ctx context.Context, id string, f kdelay.ScheduleFields, rec *kgo.Record) error {
	if rec == nil {
		return errors.New("nil record; pass &kgo.Record{Value: payload}")
	}
	rules := kdelay.Rules{Topics: p.plan.Topics, MaxDelay: p.plan.MaxDelay}
	r, _, err := schedule.Record(rules, id, f, rec.Value, rec.Headers, p.now())
	if err != nil {
		return fmt.Errorf("schedule %q: %w", id, err)
	}
	return p.writeSchedule(ctx, id, r)
}

// Unschedule deletes the recurring schedule id: kdelay writes no more of its
// occurrences, and cancels those written and not yet due.
func (p *Producer) Unschedule(ctx context.Context, id string) error {
	r, err := schedule.Tombstone(p.plan.Topics, id)
	if err != nil {
		return err
	}
	return p.writeSchedule(ctx, id, r)
}

func (p *Producer) writeSchedule(ctx context.Context, id string, r *kgo.Record) error {
	if err := p.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			err = fmt.Errorf("%w: kdelay serve creates %s at start; a kdelay older than schedules does not", err, r.Topic)
		}
		return fmt.Errorf("schedule %q: write to %s: %w", id, r.Topic, err)
	}
	return nil
}
