package schedule

import (
	"cmp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// batch is what one step writes: occurrences into the ingress and cancels
// into the control topic, then the progress of the schedules that wrote
// them. Progress is written only once the records before it are
// acknowledged (at-least-once), or in the same transaction (exactly-once).
type batch struct {
	records     []*kgo.Record
	progress    []*kgo.Record
	parts       map[int32]bool // the partitions progress is written to
	occurrences int
	late        int // of occurrences, those written after their time
	cancels     int
	snapshots   int             // progress records that are snapshots (compact.go)
	snapped     []snapped       // the slots whose snapshot b writes
	cuts        map[int32]int64 // where to trim partitions once b is written
}

// due decides what is due at now, from what plans read back: the cancels
// of changed schedules, and the occurrences due within Lookahead, at most
// max of them; then the snapshots of a compaction (compact.go). It takes
// them as written: if writing fails, the partitions are loaded again.
func (s *state) due(now time.Time, max int, plans []*plan) batch {
	b := batch{parts: map[int32]bool{}, cuts: map[int32]int64{}}
	// A partition revoked or reloaded since it was planned is not the
	// plan's: what was read back of it is another's now.
	plans = slices.DeleteFunc(plans, func(pl *plan) bool { return s.parts[pl.p.id] != pl.p })
	for _, pl := range plans {
		for _, i := range pl.changed {
			s.handleChange(pl, i, now, &b)
		}
	}
	for _, pl := range plans {
		for _, i := range pl.unknown {
			if e, ok := s.entry(pl, i); ok && e.live {
				s.store(pl.p, i, e, nextToWrite(e.sched, e.done.written, e.wrote()))
			} else {
				s.store(pl.p, i, done0(pl.p, i), time.Time{})
			}
		}
	}
	// Soonest first, as the queue gave them.
	var due []dueSlot
	for _, pl := range plans {
		for _, i := range pl.due {
			due = append(due, dueSlot{pl, i})
		}
	}
	slices.SortStableFunc(due, func(a, b dueSlot) int { return cmp.Compare(a.next(), b.next()) })
	for _, d := range due {
		e, ok := s.entry(d.pl, d.i)
		switch {
		case !ok || !e.live:
			s.store(d.pl.p, d.i, done0(d.pl.p, d.i), time.Time{})
		case b.occurrences >= max:
			d.pl.p.x.fix(d.i) // the next step's
		default:
			s.writeDue(d.pl.p, d.i, e, now, max, &b)
		}
	}
	for _, pl := range plans {
		s.snapshots(pl, &b)
	}
	return b
}

// dueSlot is a slot a plan took from its partition's queue.
type dueSlot struct {
	pl *plan
	i  int32
}

func (d dueSlot) next() uint32 { return d.pl.p.x.slot(d.i).next }

// done0 is slot i as an entry that writes nothing: its progress alone.
func done0(p *part, i int32) *entry { return &entry{part: p.id, done: done(p.x.slot(i))} }

// writeDue writes e's occurrences due within Lookahead of now; e is slot i
// of p read back.
func (s *state) writeDue(p *part, i int32, e *entry, now time.Time, max int, b *batch) {
	n := nextToWrite(e.sched, e.done.written, e.wrote())
	if n.IsZero() || n.Add(-s.cfg.Lookahead).After(now) {
		s.store(p, i, e, n) // the slot's next was early: a progress moved it
		return
	}
	if n.Before(now) {
		// No kdelay wrote it in time: all were down, or none owned the
		// partition. The schedule says what happens to those missed.
		if e.sched.Missed == kdelay.MissedLatest {
			n = e.sched.Last(n, now)
		} else if n = e.sched.Next(now.Add(-time.Nanosecond)); n.IsZero() || n.Add(-s.cfg.Lookahead).After(now) {
			// Nothing is written, so the next time the slot is due the
			// missed ones are found again, and skipped again.
			s.store(p, i, e, n)
			return
		}
	}
	wrote := false
	for ; !n.IsZero() && !n.Add(-s.cfg.Lookahead).After(now) && b.occurrences < max && !e.finished(); n = e.sched.Next(n) {
		b.records = append(b.records, s.occurrence(e, n, now))
		b.occurrences++
		if n.Before(now) {
			b.late++
		}
		e.done.written = n
		if e.done.version != e.version {
			e.done.version, e.done.count = e.version, 0
		}
		e.done.count++
		wrote = true
	}
	if wrote {
		s.writeProgress(e, b)
	}
	s.store(p, i, e, nextToWrite(e.sched, e.done.written, e.wrote()))
}

// wrote is how many occurrences e's record in force wrote.
func (e *entry) wrote() int64 {
	if e.done.version != e.version {
		return 0
	}
	return e.done.count
}

// finished reports whether e wrote all the occurrences its count allows.
func (e *entry) finished() bool {
	return e.sched.Count > 0 && e.wrote() >= e.sched.Count
}

// handleChange cancels the occurrences that slot i's previous schedule
// wrote and that are not yet due, except those its new schedule has too,
// and writes the progress that says the change was handled. The cancels
// come before the progress: a crash between them writes the cancels again.
func (s *state) handleChange(pl *plan, i int32, now time.Time, b *batch) {
	p := pl.p
	oldAt := p.changed[i]
	delete(p.changed, i)
	e, ok := s.entry(pl, i)
	old, ok2 := pl.read[oldAt]
	if !ok || !ok2 {
		return // not read back: the step failed for this partition
	}
	if _, sched, _, r := s.parse(old); r != nil {
		for t := sched.Next(now); !t.IsZero() && !t.After(e.done.written); t = sched.Next(t) {
			if e.live && e.sched.Has(t) {
				continue // it stays, with what it was written with
			}
			b.records = append(b.records, s.cancel(kdelay.OccurrenceID(e.id, t), now))
			b.cancels++
		}
	}
	if e.done.version != e.version {
		e.done.version, e.done.count = e.version, 0
	}
	s.writeProgress(e, b)
	sl := p.x.slot(i)
	sl.doneVer, sl.count = e.done.version, e.done.count
}

func (s *state) writeProgress(e *entry, b *batch) {
	b.progress = append(b.progress, progressRecord(s.cfg.Topics.Schedules(), e.part, e.id, e.done))
	b.parts[e.part] = true
}

// occurrence is the ingress record of e's occurrence at n: an ordinary
// delayed record, due at n, with the occurrence's id.
func (s *state) occurrence(e *entry, n, now time.Time) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(e.headers)+3)
	hs = append(hs, e.headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: kdelay.HeaderTarget, Value: []byte(e.sched.Target)},
		kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: []byte(kdelay.FormatDeliverAt(n))},
		kgo.RecordHeader{Key: kdelay.HeaderID, Value: []byte(kdelay.OccurrenceID(e.id, n))})
	// The key is the schedule's id, so that its occurrences reach one
	// partition of the target, in order.
	return &kgo.Record{Topic: s.cfg.Topics.Ingress(), Key: []byte(e.id), Value: e.value, Headers: hs, Timestamp: now}
}

// cancel is the control record that cancels the message with id.
func (s *state) cancel(id string, now time.Time) *kgo.Record {
	return &kgo.Record{Topic: s.cfg.Topics.Control(), Key: []byte(id), Value: []byte{}, Timestamp: now,
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderCommand, Value: []byte(kdelay.CommandCancel)}}}
}
