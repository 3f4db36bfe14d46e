package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
)

// Every record in a level waits the same time there, so the records that
// leave it by a time T are those written before T minus the level's delay.
// In a partition whose timestamps rise with its offsets, as kdelay writes
// them, they are a prefix of it: Kafka's ListOffsets by timestamp gives the
// first offset stamped at or after T minus the delay, and that offset minus
// the group's committed one is how many pending records leave the partition
// by T. No record is read, and the count is exact.
//
// A producer that writes into a level itself, with a clock S ahead, stamps
// its records S in the future. kdelay does not trust a time to come: it
// forwards such a record as soon as it is the head of its partition. The
// lookup still places it, and every record behind it in that partition
// stamped before it, S later than they leave: in a later bar, or in Ahead
// when S passes the level's delay. A clock behind is harmless to the counts:
// its records are due early, and both the forwarder and the lookup take a
// partition in offset order, so one stamped before the record ahead of it
// leaves with that record, and is counted so.

// departuresLimit is how many offset lookups run at once.
const departuresLimit = 8

// DefaultEdges are the times from now the console counts departures by:
// due now, within a minute, ten minutes, an hour, six hours, a day, a week.
func DefaultEdges() []time.Duration {
	return []time.Duration{0, time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}
}

// Departures say when the records pending in a stage leave it.
type Departures struct {
	// Bins count the pending records by when they leave, soonest first:
	// Bins[0] those due now (overdue included), then each bin those due
	// after the one before it and by its Until from now. The last bin ends
	// at the stage's delay, by when every record stamped before now leaves.
	Bins []Bin `json:"bins"`

	// Ahead counts the records stamped after now (a writer's clock ahead):
	// the lookup places them beyond the stage's delay, though the forwarder
	// moves them on as soon as they are the head of their partition.
	Ahead int64 `json:"ahead,omitempty"`

	Problem string `json:"problem,omitempty"` // why there are no bins
}

// Bin is one bar of Departures.
type Bin struct {
	Until   time.Duration `json:"until_ns"` // from now
	Records int64         `json:"records"`
}

// stageEdges are the edges that fall within wait, then wait itself: no
// record stamped before now leaves a stage later than its delay from now.
func stageEdges(edges []time.Duration, wait time.Duration) []time.Duration {
	var es []time.Duration
	for _, e := range edges {
		if e < wait {
			es = append(es, e)
		}
	}
	return append(es, wait)
}

// departures counts s's pending records by when they leave, with one
// offset lookup per edge. The ingress forwards on arrival: all its pending
// records are due now.
func (f *Fleet) departures(ctx context.Context, o offsets, s Stage, now time.Time, edges []time.Duration) Departures {
	es := stageEdges(slices.Sorted(slices.Values(edges)), s.Wait)
	leaving := make([]int64, len(es)) // leaving[i]: pending records that leave by es[i] from now
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(departuresLimit)
	for i, e := range es {
		g.Go(func() error {
			n, err := f.leavingBy(gctx, o, s, now.Add(e-s.Wait))
			leaving[i] = n
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return Departures{Problem: err.Error()}
	}
	var d Departures
	var before int64
	for i, e := range es {
		d.Bins = append(d.Bins, Bin{Until: e, Records: max(leaving[i]-before, 0)})
		before = max(before, leaving[i])
	}
	pending, _ := o.Pending(s) // what it misses, Status says
	d.Ahead = max(pending-before, 0)
	return d
}

// leavingBy counts the pending records of s stamped before stamp: the first
// offset stamped at or after it, less the group's position, in each
// partition. A partition with none stamped so late answers its end offset.
func (f *Fleet) leavingBy(ctx context.Context, o offsets, s Stage, stamp time.Time) (int64, error) {
	if s.Wait == 0 {
		pending, _ := o.Pending(s) // what it misses, Status says
		return pending, nil
	}
	listed, err := f.adm.ListOffsetsAfterMilli(ctx, stamp.UnixMilli(), s.Topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("offsets of %s by time %s: %w", s.Topic, stamp.UTC().Format(time.RFC3339), err)
	}
	var n int64
	for p, end := range o.Ends[s.Topic] {
		at, ok := listed.Lookup(s.Topic, p)
		from, _ := o.Position(s, p) // what it misses, Status says
		if end.Err != nil || !ok || from < 0 {
			continue
		}
		n += max(min(at.Offset, end.Offset)-from, 0)
	}
	return n, nil
}
