package stages

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// A stage's pending records are those its group has not committed. In each
// partition they run from the group's position to the end offset (the high
// watermark), and the position is
//
//   - the committed offset, when the group committed one;
//   - the partition's start offset when it did not: a forwarder with no
//     commit begins at the start, so every record still there is pending;
//   - the start offset too when retention deleted the records up to past the
//     commit: they are gone, and the forwarder resumes at the start.
//
// kadm's CalculateGroupLagWithStartOffsets (and Lag, built on it) does not
// count this way, so it is not used: it counts only the topics a group
// committed to, was assigned or subscribes to, so a dropped level whose group
// never committed and has no member shows no lag at all; and it takes a
// commit before the start offset as it is, counting records retention already
// deleted. It also needs the groups described, a request more.

// Offsets are the offsets pending records are counted by, read once for a
// list of stages.
type Offsets struct {
	Starts, Ends kadm.ListedOffsets              // by topic and partition
	Commits      map[string]kadm.OffsetResponses // by group; absent when it never committed
	commitErrs   map[string]error                // by group: why its commits are unknown
}

// ReadOffsets lists the start and end offsets of every stage's topic and
// fetches the committed offsets of every stage's group: three kinds of
// requests for all stages at once. A topic that does not exist is no error
// here, nor is a group whose commits could not be fetched: Pending says so
// for the stages concerned.
func ReadOffsets(ctx context.Context, adm *kadm.Client, ss []Stage) (Offsets, error) {
	o := Offsets{Commits: map[string]kadm.OffsetResponses{}, commitErrs: map[string]error{}}
	var topics []string
	for _, s := range ss {
		topics = append(topics, s.Topic)
	}
	groups := Groups(ss)
	if len(ss) == 0 {
		return o, nil
	}
	var err error
	if o.Starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
		return o, fmt.Errorf("list start offsets of %s: %w", strings.Join(topics, ","), err)
	}
	if o.Ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
		return o, fmt.Errorf("list end offsets of %s: %w", strings.Join(topics, ","), err)
	}
	for g, c := range adm.FetchManyOffsets(ctx, groups...) {
		switch {
		// A group that never committed has nothing to fetch.
		case errors.Is(c.Err, kerr.GroupIDNotFound):
		case c.Err != nil:
			o.commitErrs[g] = fmt.Errorf("committed offsets of group %s, so pending counts from the start: %w", g, c.Err)
		default:
			o.Commits[g] = c.Fetched
		}
	}
	return o, nil
}

// Position is the offset s's group reads partition p of its topic from
// next: its committed offset, or the partition's start offset when it
// never committed or retention deleted the records up to past its commit.
// The error says why it is not known: the start offset could not be listed
// (the position is -1 then), or the committed offset could not be fetched
// (the position is the start then, from which a forwarder would read).
func (o Offsets) Position(s Stage, p int32) (int64, error) {
	start, err := o.start(s, p)
	if err != nil {
		return -1, err
	}
	committed, err := o.committed(s, p)
	if err == nil {
		err = o.commitErrs[s.Group]
	}
	return max(start, committed), err
}

func (o Offsets) start(s Stage, p int32) (int64, error) {
	start, ok := o.Starts.Lookup(s.Topic, p)
	switch {
	case !ok:
		return 0, fmt.Errorf("start offset of %s/%d not listed", s.Topic, p)
	case start.Err != nil:
		return 0, fmt.Errorf("start offset of %s/%d: %w", s.Topic, p, start.Err)
	}
	return start.Offset, nil
}

// committed is the offset s's group committed on partition p, -1 when it
// committed none or it is unknown.
func (o Offsets) committed(s Stage, p int32) (int64, error) {
	c, ok := o.Commits[s.Group].Lookup(s.Topic, p)
	switch {
	case !ok:
		return -1, nil
	case c.Err != nil:
		return -1, fmt.Errorf("committed offset of group %s on %s/%d, so it counts from the start: %w", s.Group, s.Topic, p, c.Err)
	}
	return c.At, nil
}

// Pending counts the records of s its group has not committed. The error
// says which figures are missing: it wraps kerr.UnknownTopicOrPartition when
// the topic does not exist; a partition whose start or end offset could not
// be listed is left out of the count; one whose committed offset could not
// be fetched is counted from its start. A count that must be exact (is a
// dropped level drained?) takes any error as no answer.
func (o Offsets) Pending(s Stage) (int64, error) {
	ends, ok := o.Ends[s.Topic]
	if !ok {
		return 0, fmt.Errorf("end offsets of %s not listed", s.Topic)
	}
	var n int64
	errs := []error{o.commitErrs[s.Group]}
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		switch end := ends[p]; {
		case p < 0: // kadm's mark of a topic that does not exist
			errs = append(errs, fmt.Errorf("topic %s does not exist: %w", s.Topic, end.Err))
			continue
		case end.Err != nil:
			errs = append(errs, fmt.Errorf("end offset of %s/%d: %w", s.Topic, p, end.Err))
			continue
		}
		start, err := o.start(s, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		committed, err := o.committed(s, p)
		errs = append(errs, err)
		n += max(ends[p].Offset-max(start, committed), 0)
	}
	return n, join(errs)
}

// joined is errors.Join on one line: a count's problems go in a row of
// kdelay status and in a log attribute.
type joined []error

func (e joined) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e joined) Unwrap() []error { return e }

func join(errs []error) error {
	errs = slices.DeleteFunc(errs, func(err error) bool { return err == nil })
	if len(errs) == 0 {
		return nil
	}
	return joined(errs)
}
