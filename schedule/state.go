package schedule

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// state is what a Scheduler knows of the partitions of the schedules topic
// it owns: a slot per schedule id (index.go), which says what record is in
// force, its progress and when it next writes. What a slot does not keep,
// a schedule's value, headers and fields, stays in the topic and a step
// reads it back (plan.go). It does no I/O: the loop feeds it records and
// what it read back, and asks it what to write.
type state struct {
	cfg     *Config
	rules   kdelay.Rules
	parts   map[int32]*part
	place   func([]byte) int32 // the partition a producer puts a key in; nil: any
	inForce int                // schedules live, in every partition
}

// part is one partition of the schedules topic, loaded once every record
// written before it was assigned is read: only then is the last record of
// each key, the one in force, known.
type part struct {
	id     int32
	x      *index
	end    int64 // where loading ends; -1 until known
	next   int64 // the offset after the last record read
	loaded bool
	live   int // slots in force

	// changed are the slots replaced or deleted with occurrences written
	// and not yet due, each with the at offset of the schedule that wrote
	// them: its occurrences after now are cancelled, unless the new one
	// has them too (handleChange). While loading, every slot whose
	// schedule that wrote was replaced; loaded, those with some not due.
	changed map[int32]int64

	// unknown counts the slots whose next occurrence is not known: a
	// progress record moved what they wrote without saying what they write
	// next (kdelay-progress-next). A step reads them back (plan.go),
	// from the slot numbered sweep on.
	unknown int
	sweep   int32

	// base is where the records counted for compacting begin: the
	// partition's start, or where a compaction cut it (compact.go).
	base       int64
	compaction *compaction // nil unless one is under way
}

func newState(cfg *Config) *state {
	return &state{
		cfg:   cfg,
		rules: kdelay.Rules{Topics: cfg.Topics, MaxDelay: cfg.MaxDelay, LoadZone: zones()},
		parts: map[int32]*part{},
	}
}

// zones returns a loader that builds each time zone once: each
// time.LoadLocation builds the zone's table anew, some kilobytes.
func zones() func(string) (*time.Location, error) {
	loaded := map[string]*time.Location{}
	return func(name string) (*time.Location, error) {
		if loc, ok := loaded[name]; ok {
			return loc, nil
		}
		loc, err := time.LoadLocation(name)
		if err == nil {
			loaded[name] = loc
		}
		return loc, err
	}
}

// assign starts loading partitions afresh: what was known of them may be
// stale (another process wrote since), or wrong (a transaction aborted).
func (s *state) assign(ids []int32) {
	s.revoke(ids)
	for _, id := range ids {
		s.parts[id] = &part{id: id, x: newIndex(), changed: map[int32]int64{}, end: -1}
	}
}

// revoke forgets partitions.
func (s *state) revoke(ids []int32) {
	for _, id := range ids {
		if p, ok := s.parts[id]; ok {
			s.inForce -= p.live
			delete(s.parts, id)
		}
	}
}

// loading are the partitions whose end is not known yet.
func (s *state) loading() []int32 {
	var ids []int32
	for id, p := range s.parts {
		if p.end < 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// setEnd sets where loading partition id starts and ends.
func (s *state) setEnd(id int32, start, end int64, now time.Time) {
	if p, ok := s.parts[id]; ok && p.end < 0 {
		p.base, p.end = start, end
		s.checkLoaded(p, now)
	}
}

// checkLoaded ends p's loading once its end is read: of the changes, only
// those with occurrences not yet due are left to handle.
func (s *state) checkLoaded(p *part, now time.Time) {
	if p.loaded || p.end < 0 || p.next < p.end {
		return
	}
	p.loaded = true
	for i := range p.changed {
		if !s.pending(p.x.slot(i), now) {
			delete(p.changed, i)
		}
	}
	s.cfg.Logger.Info("schedules_loaded", "partition", p.id, "schedules", p.x.len())
}

// pending reports whether sl wrote occurrences not yet due at now.
func (s *state) pending(sl *slot, now time.Time) bool {
	return fromSeconds(sl.written).After(now)
}

// apply takes one record of the schedules topic.
func (s *state) apply(r *kgo.Record, now time.Time) {
	p, ok := s.parts[r.Partition]
	if !ok {
		return // revoked while fetched
	}
	p.next = r.Offset + 1
	defer s.checkLoaded(p, now)
	if r.Attrs.IsControl() {
		return
	}
	if len(r.Key) > 0 && r.Key[0] == 0 {
		if pr, ok := parseProgress(r); ok {
			s.applySnapshot(p, r, pr, now)
		}
		return
	}
	if len(r.Key) == 0 {
		s.cfg.Logger.Warn("schedule_invalid", "source", kdelay.Source(r.Topic, r.Partition, r.Offset),
			"err", "a schedule has no key; set the key to the schedule's id")
		return
	}
	i, _ := p.x.add(p.x.key(r.Key))
	s.applySchedule(p, i, r, r.Offset, now)
}

// applySnapshot takes a progress record, and the schedule record in force
// that it keeps if it is a snapshot (compact.go) and that record is newer
// than the one the slot has: the record it copied may be gone, and a newer
// one written since wins over the copy, as it would over the original.
func (s *state) applySnapshot(p *part, r *kgo.Record, pr progress, now time.Time) {
	i, _ := p.x.add(p.x.key(r.Key[1:]))
	if pr.inForce > p.x.slot(i).version {
		s.applySchedule(p, i, kept(r, pr), r.Offset, now)
	}
	if sl := p.x.slot(i); sl.version < 0 {
		sl.at = r.Offset // no schedule record read: where the id is read from
	}
	s.applyProgress(p, i, pr, now)
}

// applySchedule takes a schedule record, or its tombstone, for slot i; at
// is where it is read back from: its offset, or a snapshot's that copies
// it.
func (s *state) applySchedule(p *part, i int32, r *kgo.Record, at int64, now time.Time) {
	sl := p.x.slot(i)
	if sl.version >= 0 && r.Offset <= sl.version {
		// Older than the record in force: List passes a transaction's
		// records on at its commit marker, after records written later
		// outside it (list_txn.go). A consumer's come in offset order.
		return
	}
	if sl.flags&slotLive != 0 {
		if sl.version == sl.doneVer {
			if _, ok := p.changed[i]; !ok && (!p.loaded || s.pending(sl, now)) {
				p.changed[i] = sl.at
			}
		}
		sl.flags &^= slotLive
		p.live--
		s.inForce--
	}
	s.setUnknown(p, sl, false)
	sl.version, sl.at, sl.next = r.Offset, at, 0
	sl.flags &^= slotDeleted
	defer p.x.fix(i)
	if r.Value == nil {
		sl.flags |= slotDeleted
		return
	}
	if s.place != nil {
		if want := s.place(r.Key); want != r.Partition {
			s.cfg.Logger.Warn("schedule_misplaced", "id", string(r.Key), "source", kdelay.Source(r.Topic, r.Partition, r.Offset), "partition_wanted", want,
				"err", "the record is not in the partition Kafka's default partitioner (murmur2) puts its key in, so another version of it could be elsewhere: write it again with that partitioner (kcat -X partitioner=murmur2_random, or kdelay schedule create)")
			return
		}
	}
	sched, _, err := kdelay.ParseSchedule(r.Timestamp, r.Key, r.Headers, s.rules)
	if err != nil {
		s.cfg.Logger.Warn("schedule_invalid", "id", string(r.Key), "source", kdelay.Source(r.Topic, r.Partition, r.Offset), "err", err)
		return
	}
	sl.flags |= slotLive
	p.live++
	s.inForce++
	sl.next = nextSeconds(nextToWrite(sched, fromSeconds(sl.written), wrote(sl)))
}

// applyProgress takes a progress record of slot i. Progress only moves
// forward: a record read back after this process wrote more since, or one
// a process that lost the partition wrote late (at-least-once), changes
// nothing. Versions are offsets of one partition, so the larger is the
// newer. A record that moves it changes the slot's next occurrence, which
// it names (kdelay-progress-next) only if its writer knew this version.
func (s *state) applyProgress(p *part, i int32, pr progress, now time.Time) {
	sl := p.x.slot(i)
	before := done(sl)
	after := pr.merge(before)
	if after == before {
		return
	}
	sl.written, _ = seconds(after.written)
	sl.doneVer, sl.count = after.version, after.count
	if sl.doneVer == sl.version {
		delete(p.changed, i) // the change was handled
	}
	if sl.flags&slotLive == 0 {
		return
	}
	if pr.hasNext && pr.version == sl.version && after.written.Equal(pr.written) && after.count == pr.count {
		s.setUnknown(p, sl, false)
		sl.next = pr.next
		p.x.fix(i)
		return
	}
	s.setUnknown(p, sl, true)
}

// setUnknown flags sl's next occurrence as unknown, or known.
func (s *state) setUnknown(p *part, sl *slot, unknown bool) {
	was := sl.flags&slotNextUnknown != 0
	switch {
	case unknown && !was:
		sl.flags |= slotNextUnknown
		p.unknown++
	case !unknown && was:
		sl.flags &^= slotNextUnknown
		p.unknown--
	}
}

// done is sl's progress.
func done(sl *slot) progress {
	return progress{written: fromSeconds(sl.written), version: sl.doneVer, count: sl.count}
}

// wrote is how many occurrences the record in force of sl wrote.
func wrote(sl *slot) int64 {
	if sl.doneVer != sl.version {
		return 0
	}
	return sl.count
}

// nextToWrite is the first occurrence of sched a scheduler has yet to
// write, given the latest occurrence written, by any version of the
// schedule, and count, how many the version in force wrote; zero when
// there is none. Never at or before the latest written: its id is taken.
func nextToWrite(sched kdelay.Schedule, written time.Time, count int64) time.Time {
	if sched.Count > 0 && count >= sched.Count {
		return time.Time{}
	}
	return sched.Next(later(written, sched.Start))
}

// nextSeconds is t as a slot's next keeps it: clamped into the range
// (seconds.go), so never later than t unless t is past 2136.
func nextSeconds(t time.Time) uint32 {
	n, _ := seconds(t)
	return n
}

// wake is when the next occurrence is to be written; zero when none is.
func (s *state) wake() time.Time {
	var soonest uint32
	for _, p := range s.parts {
		if !p.loaded {
			continue
		}
		if len(p.changed) > 0 || p.unknown > 0 {
			return time.Unix(0, 0) // now
		}
		if h, ok := p.x.head(); ok {
			if n := p.x.slot(h).next; soonest == 0 || n < soonest {
				soonest = n
			}
		}
	}
	if soonest == 0 {
		return time.Time{}
	}
	return fromSeconds(soonest).Add(-s.cfg.Lookahead)
}

// soonest is the loaded partition whose queue's head is due first, and
// its head; nil when no loaded partition has any.
func (s *state) soonest() (*part, int32) {
	var best *part
	var head int32
	for _, p := range s.parts {
		if !p.loaded {
			continue
		}
		h, ok := p.x.head()
		if !ok {
			continue
		}
		if best == nil || p.x.slot(h).next < best.x.slot(head).next || p.x.slot(h).next == best.x.slot(head).next && p.id < best.id {
			best, head = p, h
		}
	}
	return best, head
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// indexBytes is what the partitions' indexes hold (index.bytes).
func (st *state) indexBytes() int64 {
	var n int64
	for _, p := range st.parts {
		n += p.x.bytes()
	}
	return n
}
