package fleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/schedule"
)

// ListSchedules reads the schedules topic to its end, as kdelay schedule
// list does (schedule.List): each schedule in force, and each record kdelay
// refuses (Listed.Err), sorted by id. It reads for at most 30s; a topic that
// does not exist is a *MissingTopicError.
func (f *Fleet) ListSchedules(ctx context.Context) ([]schedule.Listed, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	cl, err := f.cfg.client(schedule.ListOpts(f.cfg.Topics)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ls, err := schedule.List(ctx, cl, f.cfg.Rules())
	return ls, f.scheduleErr(err)
}

// ScanSchedules reads the schedules topic to its end, as ListSchedules
// does, and calls fn with each schedule in force and each record kdelay
// refuses, in no order, holding a slot per schedule id rather than every
// schedule (schedule.Scan): what a long-running process, such as the web
// console inside kdelay serve, reads them with.
func (f *Fleet) ScanSchedules(ctx context.Context, fn func(schedule.Listed)) error {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	cl, err := f.cfg.client(schedule.ListOpts(f.cfg.Topics)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return f.scheduleErr(schedule.Scan(ctx, cl, f.cfg.Rules(), fn))
}

// scheduleErr says what a failed read of the schedules topic means.
func (f *Fleet) scheduleErr(err error) error {
	switch topic := f.cfg.Topics.Schedules(); {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return &MissingTopicError{Topic: topic, Brokers: f.cfg.Brokers}
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("read %s: not to its end within %s: check that the brokers serve it", topic, statusTimeout)
	}
	return err
}

// DeleteSchedule writes the tombstone of schedule id, the record kdelay
// schedule delete writes (schedule.Tombstone), and waits for the broker to
// acknowledge it; the record it returns then has its partition and offset.
// kdelay writes no more occurrences of the schedule, and cancels those
// written and not yet due.
//
// The fleet's client partitions by murmur2 of the key, Kafka's default, so
// the tombstone lands in the partition of the schedule it deletes.
func (f *Fleet) DeleteSchedule(ctx context.Context, id string) (*kgo.Record, error) {
	r, err := schedule.Tombstone(f.cfg.Topics, id)
	if err != nil {
		return nil, err
	}
	return r, f.produce(ctx, r)
}
