package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// Listed is a schedule as the schedules topic holds it now.
type Listed struct {
	ID        string
	Schedule  kdelay.Schedule // valid when Err is nil
	Err       error           // why kdelay refuses the record
	Value     []byte
	Written   time.Time // the latest occurrence written into the ingress; zero for none
	Count     int64     // the occurrences this version of the schedule wrote
	Partition int32
	Offset    int64 // of the schedule record: its version
}

// Next is the schedule's first occurrence after now that is or will be
// written into the ingress; zero when there is none: refused, past its
// until, or its count reached.
func (l Listed) Next(now time.Time) time.Time {
	if l.Err != nil {
		return time.Time{} // refused: never in force
	}
	n := l.Schedule.After(now)
	if l.Schedule.Count > 0 && l.Count >= l.Schedule.Count && n.After(l.Written) {
		return time.Time{}
	}
	return n
}

// Overdue reports whether the next occurrence kdelay is to write was due
// before now: it is written a minute ahead (Config.Lookahead), so no kdelay
// owns the schedule's partition, or the one that does is behind. A
// schedule whose missed occurrences are skipped stays overdue from its
// first one missed until kdelay writes its next.
func (l Listed) Overdue(now time.Time) bool {
	if l.Err != nil {
		return false
	}
	n := nextToWrite(l.Schedule, l.Written, l.Count)
	return !n.IsZero() && n.Before(now)
}

// ListOpts are the options of the client List reads with.
func ListOpts(topics kdelay.Topics) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumeTopics(topics.Schedules()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Read to the end and kept to what is committed there: see
		// committed.
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
	}
}

// List reads the schedules topic to its end with cl, a client made with
// ListOpts, and returns the schedules in force, sorted by id.
func List(ctx context.Context, cl *kgo.Client, rules kdelay.Rules) ([]Listed, error) {
	topic := rules.Topics.Schedules()
	adm := kadm.NewClient(cl)
	// A partition trimmed to its end (compact.go) starts where it ends, and
	// has nothing to read.
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	ends, err2 := adm.ListEndOffsets(ctx, topic)
	if err = errors.Join(err, err2); err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("read where %s starts and ends: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if start, _ := starts.Lookup(o.Topic, o.Partition); o.Offset > start.Offset {
			left[o.Partition] = o.Offset
		}
	})
	l := listing{byID: map[string]*Listed{}, version: map[string]int64{}, done: map[string]progress{}}
	txns := map[int32]*committed{}
	apply := func(r *kgo.Record) { l.add(r, rules) }
	for len(left) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := fetches.Err0(); err != nil {
			return nil, fmt.Errorf("read %s: %w", topic, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := left[r.Partition]; ok && r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			c, ok := txns[r.Partition]
			if !ok {
				c = &committed{}
				txns[r.Partition] = c
			}
			c.take(r, apply)
		})
	}
	var out []Listed
	for id, listed := range l.byID {
		done := l.done[id]
		listed.Written = done.written
		if done.version == listed.Offset {
			listed.Count = done.count
		}
		out = append(out, *listed)
	}
	slices.SortFunc(out, func(a, b Listed) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// listing is what List has read so far.
type listing struct {
	byID    map[string]*Listed
	version map[string]int64    // the offset of each id's record in force, a schedule or its tombstone
	done    map[string]progress // each id's, merged as the scheduler merges it
}

// add takes one record, as the scheduler does (state.apply): a snapshot's
// copy of a schedule record counts as that record, if it is newer than the
// one read.
func (l *listing) add(r *kgo.Record, rules kdelay.Rules) {
	switch {
	case r.Attrs.IsControl() || len(r.Key) == 0:
	case r.Key[0] == 0:
		p, ok := parseProgress(r)
		if !ok {
			return
		}
		id := string(r.Key[1:])
		done, ok := l.done[id]
		if !ok {
			done.version = -1
		}
		l.done[id] = p.merge(done)
		if v, read := l.version[id]; p.inForce >= 0 && (!read || p.inForce > v) {
			l.schedule(kept(r, p), rules)
		}
	default:
		l.schedule(r, rules)
	}
}

// schedule takes a schedule record or its tombstone, unless a newer one of
// its id was taken: a transaction's records come at its commit marker, after
// records written later outside it.
func (l *listing) schedule(r *kgo.Record, rules kdelay.Rules) {
	id := string(r.Key)
	if v, read := l.version[id]; read && v > r.Offset {
		return
	}
	l.version[id] = r.Offset
	if r.Value == nil {
		delete(l.byID, id)
		return
	}
	s, _, err := kdelay.ParseSchedule(r.Timestamp, r.Key, r.Headers, rules)
	l.byID[id] = &Listed{ID: id, Schedule: s, Err: err, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
}
