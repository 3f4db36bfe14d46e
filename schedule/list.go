package schedule

import (
	"context"
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
	Partition int32
	Offset    int64
}

// ListOpts are the options of the client List reads with.
func ListOpts(topics kdelay.Topics) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumeTopics(topics.Schedules()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	}
}

// List reads the schedules topic to its end with cl, a client made with
// ListOpts, and returns the schedules in force, sorted by id.
func List(ctx context.Context, cl *kgo.Client, rules kdelay.Rules) ([]Listed, error) {
	topic := rules.Topics.Schedules()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("read where %s ends: %w", topic, err)
	}
	left := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			left[o.Partition] = o.Offset
		}
	})
	byID := map[string]*Listed{}
	written := map[string]time.Time{}
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
			listRecord(r, rules, byID, written)
		})
	}
	var out []Listed
	for id, l := range byID {
		l.Written = written[id]
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b Listed) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func listRecord(r *kgo.Record, rules kdelay.Rules, byID map[string]*Listed, written map[string]time.Time) {
	switch {
	case r.Attrs.IsControl() || len(r.Key) == 0:
	case r.Key[0] == 0:
		if p, ok := parseProgress(r); ok && p.written.After(written[string(r.Key[1:])]) {
			written[string(r.Key[1:])] = p.written
		}
	case r.Value == nil:
		delete(byID, string(r.Key))
	default:
		s, _, err := kdelay.ParseSchedule(r.Timestamp, r.Key, r.Headers, rules)
		byID[string(r.Key)] = &Listed{ID: string(r.Key), Schedule: s, Err: err, Value: r.Value, Partition: r.Partition, Offset: r.Offset}
	}
}
