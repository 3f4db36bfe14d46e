package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// Nothing indexes records by id: finding a message reads what is pending in
// the ingress and every level, from each group's committed offset to the end
// the partition has when the search starts, and the control topic for a
// command in force. A fleet with millions of pending records would take
// minutes, so a search is bounded in bytes and time, and says what it read.

// Default bounds of a search.
const (
	DefaultFindBytes = 256 << 20
	DefaultFindTime  = 30 * time.Second
)

// progressInterval is how often a search reports how far it got.
const progressInterval = 500 * time.Millisecond

// FindLimits bound a search.
type FindLimits struct {
	// MaxBytes bounds the record data read: keys, values and headers.
	// Default DefaultFindBytes, 256 MiB.
	MaxBytes int64

	// MaxTime bounds the search. Default DefaultFindTime, 30s.
	MaxTime time.Duration
}

// Found is a pending record with the id searched for.
type Found struct {
	Stage     string // "ingress", or the level's name
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// Leaves is when it leaves its stage: its timestamp plus the level's
	// delay, or now for the ingress and for a record stamped in the future.
	Leaves time.Time
	Due    time.Time // when kdelay delivers it, from its headers; zero if they are not valid
	Target string
	Key    []byte
}

// Place is the record's topic/partition/offset.
func (f Found) Place() string { return kdelay.Source(f.Topic, f.Partition, f.Offset) }

// Governing is the command in force for an id: the last one written to the
// control topic for it.
type Governing struct {
	Command kdelay.Command
	Written time.Time
	Place   string // its topic/partition/offset
}

// Search is what a search read, and what it found.
type Search struct {
	ID       string
	Topics   []string // searched: the ingress, the levels, the control topic
	Records  int64    // read
	Bytes    int64    // of record data read
	Pending  int64    // records it set out to read
	Took     time.Duration
	Complete bool   // every pending record and command was read
	Stopped  string // why not, when not: "the 256 MiB limit", "the 30s limit", the error
	Found    []Found
	Command  *Governing // nil when no command is in force
}

// Find searches the pending records and the commands for the message with
// kdelay-id id, within limits, and calls progress (when not nil) every
// 500ms with how far it got. Its result says what it read even when it
// stopped early; ctx ending stops it too, as a limit does.
func (f *Fleet) Find(ctx context.Context, id string, limits FindLimits, now time.Time, progress func(Search)) (Search, error) {
	limits.MaxBytes = cmp.Or(limits.MaxBytes, DefaultFindBytes)
	limits.MaxTime = cmp.Or(limits.MaxTime, DefaultFindTime)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, limits.MaxTime)
	defer cancel()
	s := Search{ID: id}
	ss, err := f.Stages(ctx)
	if err != nil {
		return s, err
	}
	offs, err := readOffsets(ctx, f.adm, ss)
	if err != nil {
		return s, err
	}
	sc, err := f.scanPlan(ctx, offs, ss)
	if err != nil {
		return s, err
	}
	s.Topics, s.Pending = sc.topics, sc.total
	err = f.scan(ctx, sc, &s, limits, now, progress)
	s.Took = time.Since(start)
	switch {
	case err == nil:
		s.Complete = s.Stopped == ""
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		s.Stopped = "the " + limits.MaxTime.String() + " limit"
	default:
		s.Stopped = err.Error()
	}
	return s, nil
}

// scanPlan is what a search reads: the offsets to read from and up to, by
// topic and partition, and the stage of each topic.
type scanPlan struct {
	from, to map[string]map[int32]int64
	stages   map[string]Stage
	topics   []string
	total    int64
}

func (f *Fleet) scanPlan(ctx context.Context, o offsets, ss []Stage) (scanPlan, error) {
	p := scanPlan{from: map[string]map[int32]int64{}, to: map[string]map[int32]int64{}, stages: map[string]Stage{}}
	control := f.cfg.Topics.Control()
	for _, s := range ss {
		p.stages[s.Topic] = s
		p.topics = append(p.topics, s.Topic)
	}
	p.topics = append(p.topics, control)
	controlStarts, err := f.adm.ListStartOffsets(ctx, control)
	if err != nil {
		return p, fmt.Errorf("list start offsets of %s: %w", control, err)
	}
	// Up to the last stable offset: records after it are in a transaction
	// still open, which no forwarder reads yet either.
	stable, err := f.adm.ListCommittedOffsets(ctx, p.topics...)
	if err != nil {
		return p, fmt.Errorf("list last stable offsets of %s: %w", strings.Join(p.topics, ","), err)
	}
	stable.Each(func(end kadm.ListedOffset) {
		from, ok := controlStarts.Lookup(end.Topic, end.Partition)
		if s, isStage := p.stages[end.Topic]; isStage {
			at, _ := o.Position(s, end.Partition) // what it misses, Status says
			from, ok = kadm.ListedOffset{Offset: at}, at >= 0
		}
		if !ok || end.Err != nil || end.Offset <= from.Offset {
			return
		}
		if p.from[end.Topic] == nil {
			p.from[end.Topic], p.to[end.Topic] = map[int32]int64{}, map[int32]int64{}
		}
		p.from[end.Topic][end.Partition], p.to[end.Topic][end.Partition] = from.Offset, end.Offset
		p.total += end.Offset - from.Offset
	})
	return p, nil
}

// scan reads sc with a consumer of its own, outside any group, and adds to
// s what matches s.ID.
func (f *Fleet) scan(ctx context.Context, sc scanPlan, s *Search, limits FindLimits, now time.Time, progress func(Search)) error {
	if sc.total == 0 {
		return nil
	}
	offsets := map[string]map[int32]kgo.Offset{}
	for topic, ps := range sc.from {
		offsets[topic] = map[int32]kgo.Offset{}
		for part, at := range ps {
			offsets[topic][part] = kgo.NewOffset().At(at)
		}
	}
	// Read committed, so that an aborted copy is not taken for the
	// message; with the transaction markers kept, so that a partition that
	// ends with one is seen to end.
	cl, err := f.cfg.client(kgo.ConsumePartitions(offsets), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer cl.Close()
	left := 0
	for _, ps := range sc.to {
		left += len(ps)
	}
	control := f.cfg.Topics.Control()
	lastSaid := time.Now()
	for left > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := FetchErr(fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := sc.to[r.Topic][r.Partition]
			if !ok || r.Offset >= end || s.Bytes >= limits.MaxBytes {
				return // past the end, or past the limit: not read
			}
			s.Records++
			s.Bytes += recordBytes(r)
			switch {
			case r.Attrs.IsControl():
			case r.Topic == control:
				s.command(r, f.cfg.Rules())
			default:
				s.match(r, sc.stages[r.Topic], f.cfg.Rules(), now)
			}
			if r.Offset >= end-1 {
				left--
				cl.PauseFetchPartitions(map[string][]int32{r.Topic: {r.Partition}})
			}
		})
		if s.Bytes >= limits.MaxBytes && left > 0 {
			s.Stopped = "the " + BytesText(limits.MaxBytes) + " limit"
			return nil
		}
		if progress != nil && time.Since(lastSaid) >= progressInterval {
			progress(*s)
			lastSaid = time.Now()
		}
	}
	return nil
}

// match adds r to s.Found if it is the message searched for. A record
// without a kdelay-id has its place as id, as the ingress gives it.
func (s *Search) match(r *kgo.Record, st Stage, rules kdelay.Rules, now time.Time) {
	rt, _, err := kdelay.Parse(r.Timestamp, r.Headers, rules)
	id, ok := Header(r, kdelay.HeaderID)
	if !ok {
		id = kdelay.Source(r.Topic, r.Partition, r.Offset)
	}
	if id != s.ID {
		return
	}
	fd := Found{Stage: st.Name, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Leaves: r.Timestamp.Add(st.Wait), Key: r.Key}
	if st.Wait == 0 || r.Timestamp.After(now) {
		fd.Leaves = now
	}
	if err == nil {
		fd.Due, fd.Target = rt.Due, rt.Target
	} else {
		fd.Target, _ = Header(r, kdelay.HeaderTarget)
	}
	s.Found = append(s.Found, fd)
}

// command keeps control record r if it is for the id searched for: the
// last one read is in force, and a tombstone ends the one before it. A
// compacted topic keeps the last record of a key, so reading it whole finds
// it.
func (s *Search) command(r *kgo.Record, rules kdelay.Rules) {
	if string(r.Key) != s.ID {
		return
	}
	if r.Value == nil {
		s.Command = nil
		return
	}
	c, err := kdelay.ParseCommand(r.Timestamp, r.Key, r.Headers, rules)
	if err != nil {
		return // refused by kdelay too: not in force
	}
	s.Command = &Governing{Command: c, Written: r.Timestamp, Place: kdelay.Source(r.Topic, r.Partition, r.Offset)}
}

func recordBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// BytesText is n bytes as a person reads it: 256 MiB, 12 KiB, 300 B.
func BytesText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}
