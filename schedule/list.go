package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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
		// Not franz-go's 50 MiB a fetch: schedules compress well, and a
		// fetch decoded costs many times its bytes (fetchBytes).
		kgo.FetchMaxBytes(fetchBytes),
		kgo.FetchMaxPartitionBytes(fetchBytes),
	}
}

// List reads the schedules topic to its end with cl, a client made with
// ListOpts, and returns the schedules in force, and the records kdelay
// refuses (Listed.Err), sorted by id. It holds every one in memory: Scan
// holds a slot per id.
func List(ctx context.Context, cl *kgo.Client, rules kdelay.Rules) ([]Listed, error) {
	var out []Listed
	err := Scan(ctx, cl, rules, func(l Listed) { out = append(out, l) })
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Listed) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Scan reads the schedules topic to its end with cl, a client made with
// ListOpts, and calls fn with each schedule in force and each record kdelay
// refuses (Listed.Err), in no order. It keeps what the scheduler keeps, a
// slot per schedule id (index.go), of one partition at a time, and reads
// each partition twice to the end it found first: to learn each id's
// record in force and progress, then to pass on those records. So a
// million schedules cost it a slot each of the largest partition's, not a
// Listed each. It pauses cl's fetches of the partitions it is not reading.
func Scan(ctx context.Context, cl *kgo.Client, rules kdelay.Rules, fn func(Listed)) error {
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
		return fmt.Errorf("read where %s starts and ends: %w", topic, err)
	}
	left := map[int32]int64{}
	var ids []int32
	ends.Each(func(o kadm.ListedOffset) {
		ids = append(ids, o.Partition)
		if start, _ := starts.Lookup(o.Topic, o.Partition); o.Offset > start.Offset {
			left[o.Partition] = o.Offset
		}
	})
	cfg := Config{Topics: rules.Topics, MaxDelay: rules.MaxDelay, Logger: slog.New(slog.DiscardHandler)}
	if rules.LoadZone == nil {
		rules.LoadZone = zones()
	}
	// One partition at a time, so that what Scan holds is the index of one
	// (a sixth of it all on the default six): the web console scans inside
	// kdelay serve, beside the scheduler's own index.
	all := map[string][]int32{topic: ids}
	for _, id := range slices.Sorted(maps.Keys(left)) {
		cl.PauseFetchPartitions(all)
		cl.ResumeFetchPartitions(map[string][]int32{topic: {id}})
		st := newState(&cfg)
		st.rules = rules
		st.assign([]int32{id})
		if err := scanPartition(ctx, cl, topic, st, id, left[id], fn); err != nil {
			return err
		}
	}
	return nil
}

// scanPartition reads partition id of topic to end twice with cl: into
// st's index, then to pass fn each record the index says is in force.
func scanPartition(ctx context.Context, cl *kgo.Client, topic string, st *state, id int32, end int64, fn func(Listed)) error {
	// From the start each time: kgo drops what it fetched before.
	fromStart := map[string]map[int32]kgo.EpochOffset{topic: {id: {Epoch: -1, Offset: 0}}}
	now := time.Now()
	cl.SetOffsets(fromStart)
	if err := readCommitted(ctx, cl, topic, map[int32]int64{id: end}, func(r *kgo.Record) { st.apply(r, now) }); err != nil {
		return err
	}
	cl.SetOffsets(fromStart)
	p := st.parts[id]
	return readCommitted(ctx, cl, topic, map[int32]int64{id: end}, func(r *kgo.Record) {
		if r.Attrs.IsControl() || len(r.Key) == 0 {
			return
		}
		key := r.Key
		if key[0] == 0 {
			key = key[1:]
		}
		i, ok := p.x.find(p.x.key(key))
		if !ok {
			return
		}
		// The record each id's slot names: its record in force, or the
		// snapshot that copies it; none for a deleted one.
		if sl := p.x.slot(i); sl.at == r.Offset && sl.version >= 0 && sl.flags&slotDeleted == 0 {
			fn(listed(st, sl, r))
		}
	})
}

// readCommitted reads the partitions of topic in left to their ends
// (left's values) with cl, and passes fn the records a read_committed
// reader would see (committed): a transaction's at its commit marker.
func readCommitted(ctx context.Context, cl *kgo.Client, topic string, left map[int32]int64, fn func(*kgo.Record)) error {
	txns := map[int32]*committed{}
	for len(left) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fetches.Err0(); err != nil {
			return fmt.Errorf("read %s: %w", topic, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := left[r.Partition]
			if !ok {
				return // read to its end already
			}
			if r.Offset+1 >= end {
				delete(left, r.Partition)
			}
			c, ok := txns[r.Partition]
			if !ok {
				c = &committed{}
				txns[r.Partition] = c
			}
			c.take(r, fn)
		})
	}
	return nil
}

// listed is what slot sl and its record in force r, read back, say.
func listed(st *state, sl *slot, r *kgo.Record) Listed {
	if len(r.Key) > 0 && r.Key[0] == 0 { // a snapshot: the copy it keeps
		pr, _ := parseProgress(r)
		r = kept(r, pr)
	}
	s, _, err := kdelay.ParseSchedule(r.Timestamp, r.Key, r.Headers, st.rules)
	l := Listed{ID: string(r.Key), Schedule: s, Err: err, Value: slices.Clone(r.Value), Partition: r.Partition,
		Offset: r.Offset, Written: fromSeconds(sl.written)}
	if sl.doneVer == sl.version {
		l.Count = sl.count
	}
	return l
}
