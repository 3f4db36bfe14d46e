package schedule

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// A step reads back, before it decides what to write, the records that the
// slots it will write for name (docs/design/schedules-at-scale.md): a
// slot keeps where its schedule is, not what it says. plan picks the slots
// and the offsets; the reader reads them, one sweep a partition; due
// (due.go) decides from what was read. The loop is alone with the state between
// the two (the group's callbacks run while it polls), so the slots planned
// are still there when it decides.

// plan is what a step reads back of one partition, and why.
type plan struct {
	p       *part
	changed []int32 // slots whose change is handled: their old record and the one in force
	due     []int32 // slots taken from the queue: due within Lookahead
	unknown []int32 // slots whose next occurrence is not known
	snap    []int32 // slots a compaction snapshots
	cut     bool    // the compaction ends with snap

	read map[int64]*kgo.Record // the records read back, by offset
}

// offsets are the offsets p reads back, ascending, each once.
func (pl *plan) offsets() []int64 {
	var out []int64
	for i, old := range pl.p.changed {
		if slices.Contains(pl.changed, i) {
			out = append(out, old)
		}
	}
	for _, list := range [][]int32{pl.changed, pl.due, pl.unknown, pl.snap} {
		for _, i := range list {
			if at := pl.p.x.slot(i).at; at >= 0 { // -1: no record read, none to read back
				out = append(out, at)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// plan returns what a step at now reads back: every change to handle, the
// slots due within Lookahead and those whose next occurrence is unknown,
// at most max of each, and the slots a compaction snapshots next. It takes
// the due slots out of the queue: decide puts each back.
func (s *state) plan(now time.Time, max int) []*plan {
	plans := map[int32]*plan{}
	get := func(p *part) *plan {
		pl, ok := plans[p.id]
		if !ok {
			pl = &plan{p: p}
			plans[p.id] = pl
		}
		return pl
	}
	for _, p := range s.parts {
		if !p.loaded {
			continue
		}
		for i := range p.changed {
			get(p).changed = append(get(p).changed, i)
		}
		if p.unknown > 0 {
			pl := get(p)
			for ; p.sweep < int32(p.x.len()) && len(pl.unknown) < max; p.sweep++ {
				if p.x.slot(p.sweep).flags&slotNextUnknown != 0 {
					pl.unknown = append(pl.unknown, p.sweep)
				}
			}
			if p.sweep == int32(p.x.len()) {
				p.sweep = 0 // the next sweep starts over: a slot may be flagged again
			}
		}
	}
	for taken := 0; taken < max; taken++ {
		p, h := s.soonest()
		if p == nil || fromSeconds(p.x.slot(h).next).Add(-s.cfg.Lookahead).After(now) {
			break
		}
		p.x.unqueue(p.x.slot(h))
		get(p).due = append(get(p).due, h)
	}
	s.compact(max, get)
	out := make([]*plan, 0, len(plans))
	for _, id := range slices.Sorted(maps.Keys(plans)) {
		slices.Sort(plans[id].changed) // a step is the same whatever the map's order
		out = append(out, plans[id])
	}
	return out
}

// readBack reads back what pl names with r. It copies each record it
// keeps: the reader's are views of the fetched bytes.
func readBack(ctx context.Context, r *reader, pl *plan) error {
	pl.read = map[int64]*kgo.Record{}
	return r.read(ctx, pl.p.id, pl.offsets(), func(rec *kgo.Record) {
		c := *rec
		c.Key = append([]byte(nil), rec.Key...)
		c.Value, c.Headers = detach(rec.Value, rec.Headers)
		if rec.Value == nil {
			c.Value = nil // a tombstone stays one
		}
		pl.read[rec.Offset] = &c
	})
}

// entry is one schedule as a step reads it back: its slot's progress, and
// what the record at its at offset says.
type entry struct {
	id      string
	part    int32
	sched   kdelay.Schedule // in force when live
	live    bool
	version int64
	value   []byte             // every occurrence's
	headers []kgo.RecordHeader // the user's, on every occurrence
	done    progress
}

// entry is slot i of pl's partition with the record read back at its at
// offset: its schedule, or, at a snapshot, the copy it keeps. ok is false
// when none was read there.
func (s *state) entry(pl *plan, i int32) (e *entry, ok bool) {
	sl := pl.p.x.slot(i)
	r, ok := pl.read[sl.at]
	if !ok {
		return nil, false
	}
	e = &entry{part: pl.p.id, version: sl.version, done: done(sl)}
	if sl.flags&slotLive == 0 {
		e.id = string(r.Key)
		if len(r.Key) > 0 && r.Key[0] == 0 {
			e.id = string(r.Key[1:])
		}
		return e, true
	}
	id, sched, user, r := s.parse(r)
	e.id = id
	if r != nil {
		e.sched, e.live, e.value, e.headers = sched, true, r.Value, user
	}
	return e, true
}

// parse reads a record read back: a schedule record, or a progress record
// (a snapshot, or the progress alone). It returns the schedule's id, and
// the schedule record, what it says and the user's headers if it is a
// schedule, r nil if not: a tombstone, a progress alone, or one the rules
// refuse now (they changed since it was applied: it writes nothing more).
func (s *state) parse(r *kgo.Record) (id string, sched kdelay.Schedule, user []kgo.RecordHeader, _ *kgo.Record) {
	if len(r.Key) > 0 && r.Key[0] == 0 {
		id = string(r.Key[1:])
		pr, ok := parseProgress(r)
		if !ok || pr.inForce < 0 {
			return id, sched, nil, nil
		}
		r = kept(r, pr)
	} else {
		id = string(r.Key)
	}
	if r.Value == nil {
		return id, sched, nil, nil
	}
	sched, user, err := kdelay.ParseSchedule(r.Timestamp, r.Key, r.Headers, s.rules)
	if err != nil {
		s.cfg.Logger.Warn("schedule_invalid", "id", id, "source", kdelay.Source(r.Topic, r.Partition, r.Offset), "err", err)
		return id, sched, nil, nil
	}
	return id, sched, user, r
}

// store puts what a step did to e back in slot i, with its next occurrence
// to write, and queues it.
func (s *state) store(p *part, i int32, e *entry, next time.Time) {
	sl := p.x.slot(i)
	sl.written, _ = seconds(e.done.written)
	sl.doneVer, sl.count = e.done.version, e.done.count
	sl.next = nextSeconds(next)
	s.setUnknown(p, sl, false)
	p.x.fix(i)
}

// detach copies a record's value and headers into one buffer of their own:
// as fetched, each is a slice of the whole batch the record came in, which
// a record kept beyond the fetch would keep alive, and the reader's buffers
// are reused.
func detach(value []byte, hs []kgo.RecordHeader) ([]byte, []kgo.RecordHeader) {
	n := len(value)
	for _, h := range hs {
		n += len(h.Value)
	}
	buf := append(make([]byte, 0, n), value...)
	value = buf[:len(value):len(value)]
	var out []kgo.RecordHeader
	if len(hs) > 0 {
		out = make([]kgo.RecordHeader, len(hs))
	}
	for i, h := range hs {
		out[i].Key = h.Key
		if h.Value != nil { // a null header stays null
			start := len(buf)
			buf = append(buf, h.Value...)
			out[i].Value = buf[start:len(buf):len(buf)]
		}
	}
	return value, out
}
