package schedule

import (
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
	cuts        map[int32]int64 // where to trim partitions once b is written
}

// due returns what is due at now: the cancels of changed schedules, and
// the occurrences due within Lookahead, at most max of them. It takes them
// as written: if writing fails, the partitions are loaded again.
func (s *state) due(now time.Time, max int) batch {
	b := batch{parts: map[int32]bool{}, cuts: map[int32]int64{}}
	for e := range s.changed {
		s.handleChange(e, now, &b)
	}
	for len(s.queue) > 0 && b.occurrences < max {
		e := s.queue[0]
		if e.next.Add(-s.cfg.Lookahead).After(now) {
			break
		}
		s.writeDue(e, now, max, &b)
	}
	return b
}

// writeDue writes e's occurrences due within Lookahead of now.
func (s *state) writeDue(e *entry, now time.Time, max int, b *batch) {
	n := e.next
	if n.Before(now) {
		// No kdelay wrote it in time: all were down, or none owned the
		// partition. The schedule says what happens to those missed.
		if e.sched.Missed == kdelay.MissedLatest {
			n = e.sched.Last(n, now)
		} else if n = e.sched.Next(now.Add(-time.Nanosecond)); n.IsZero() || n.Add(-s.cfg.Lookahead).After(now) {
			// Nothing is written, so the next refresh finds the missed
			// ones again, and skips them again.
			e.next = n
			s.requeue(e)
			return
		}
	}
	wrote := false
	for ; !n.IsZero() && !n.Add(-s.cfg.Lookahead).After(now) && b.occurrences < max && !s.finished(e); n = e.sched.Next(n) {
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
	s.refresh(e, now)
}

// finished reports whether e wrote all the occurrences its count allows.
func (s *state) finished(e *entry) bool {
	return e.sched.Count > 0 && e.wrote() >= e.sched.Count
}

func (s *state) requeue(e *entry) {
	if e.next.IsZero() {
		s.unqueue(e)
		return
	}
	s.queue.fix(e)
}

// handleChange cancels the occurrences that e's previous schedule wrote and
// that are not yet due, except those its new schedule has too, and writes
// the progress that says the change was handled. The cancels come before
// the progress: a crash between them writes the cancels again.
func (s *state) handleChange(e *entry, now time.Time, b *batch) {
	old := e.prev
	for t := old.Next(now); !t.IsZero() && !t.After(e.done.written); t = old.Next(t) {
		if e.live && e.sched.Has(t) {
			continue // it stays, with what it was written with
		}
		b.records = append(b.records, s.cancel(kdelay.OccurrenceID(e.id, t), now))
		b.cancels++
	}
	e.prev = nil
	delete(s.changed, e)
	if e.done.version != e.version {
		e.done.version, e.done.count = e.version, 0
	}
	s.writeProgress(e, b)
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
