package schedule

import (
	"container/heap"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// state is what a Scheduler knows of the partitions of the schedules topic
// it owns: each schedule in force, its progress, and when it next writes.
// It does no I/O: the loop feeds it records and asks it what to write.
type state struct {
	cfg     *Config
	rules   kdelay.Rules
	parts   map[int32]*part
	queue   queue              // entries with an occurrence to write, soonest first
	changed map[*entry]bool    // entries replaced or deleted with occurrences written and not yet due
	place   func([]byte) int32 // the partition a producer puts a key in; nil: any
	inForce int                // entries live, in every partition
}

// part is one partition of the schedules topic, loaded once every record
// written before it was assigned is read: only then is the last record of
// each key, the one in force, known.
type part struct {
	id      int32
	entries map[string]*entry
	end     int64 // where loading ends; -1 until known
	next    int64 // the offset after the last record read
	loaded  bool

	// base is where the records counted for compacting begin: the
	// partition's start, or where a compaction cut it (compact.go).
	base       int64
	compaction *compaction // nil unless one is under way
}

// entry is one schedule id.
type entry struct {
	id      string
	part    int32
	sched   kdelay.Schedule // in force when live
	live    bool
	version int64              // offset of the record in force, a schedule or its tombstone
	value   []byte             // every occurrence's
	headers []kgo.RecordHeader // the user's, on every occurrence
	done    progress           // as written last
	// prev is the schedule that wrote done.written, replaced or deleted
	// since: its occurrences after now are cancelled, unless the new one
	// has them too.
	prev  *kdelay.Schedule
	next  time.Time // the next occurrence to write; zero for none
	index int       // in queue; -1 when not in it
}

func newState(cfg *Config) *state {
	return &state{
		cfg:     cfg,
		rules:   kdelay.Rules{Topics: cfg.Topics, MaxDelay: cfg.MaxDelay, LoadZone: zones()},
		parts:   map[int32]*part{},
		changed: map[*entry]bool{},
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
		s.parts[id] = &part{id: id, entries: map[string]*entry{}, end: -1}
	}
}

// revoke forgets partitions.
func (s *state) revoke(ids []int32) {
	for _, id := range ids {
		p, ok := s.parts[id]
		if !ok {
			continue
		}
		for _, e := range p.entries {
			s.unqueue(e)
			delete(s.changed, e)
			if e.live {
				s.inForce--
			}
		}
		delete(s.parts, id)
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

func (s *state) checkLoaded(p *part, now time.Time) {
	if p.loaded || p.end < 0 || p.next < p.end {
		return
	}
	p.loaded = true
	for _, e := range p.entries {
		s.refresh(e, now)
	}
	s.cfg.Logger.Info("schedules_loaded", "partition", p.id, "schedules", len(p.entries))
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
			s.applySnapshot(p, s.entry(p, string(r.Key[1:])), r, pr, now)
		}
		return
	}
	if len(r.Key) == 0 {
		s.cfg.Logger.Warn("schedule_invalid", "source", kdelay.Source(r.Topic, r.Partition, r.Offset),
			"err", "a schedule has no key; set the key to the schedule's id")
		return
	}
	e := s.entry(p, string(r.Key))
	s.applySchedule(e, r)
	if p.loaded {
		s.refresh(e, now)
	}
}

func (s *state) entry(p *part, id string) *entry {
	e, ok := p.entries[id]
	if !ok {
		e = &entry{id: id, part: p.id, version: -1, done: progress{version: -1}, index: -1}
		p.entries[id] = e
	}
	return e
}

// applySnapshot takes a progress record of e, and the schedule record in
// force that it keeps if it is a snapshot (compact.go) and that record is
// newer than the one e has: the record it copied may be gone, and a newer
// one written since wins over the copy, as it would over the original.
func (s *state) applySnapshot(p *part, e *entry, r *kgo.Record, pr progress, now time.Time) {
	newer := pr.inForce > e.version
	if newer {
		s.applySchedule(e, kept(r, pr))
	}
	s.applyProgress(e, pr)
	if newer && p.loaded {
		s.refresh(e, now)
	}
}

// applySchedule takes a schedule record, or its tombstone, for e.
func (s *state) applySchedule(e *entry, r *kgo.Record) {
	if e.live && e.version == e.done.version {
		prev := e.sched
		e.prev = &prev
	}
	if e.live {
		s.inForce--
	}
	e.version, e.live, e.value, e.headers = r.Offset, false, nil, nil
	if r.Value == nil {
		return // deleted
	}
	if s.place != nil {
		if want := s.place(r.Key); want != r.Partition {
			s.cfg.Logger.Warn("schedule_misplaced", "id", e.id, "source", kdelay.Source(r.Topic, r.Partition, r.Offset), "partition_wanted", want,
				"err", "the record is not in the partition Kafka's default partitioner (murmur2) puts its key in, so another version of it could be elsewhere: write it again with that partitioner (kcat -X partitioner=murmur2_random, or kdelay schedule create)")
			return
		}
	}
	sched, user, err := kdelay.ParseSchedule(r.Timestamp, r.Key, r.Headers, s.rules)
	if err != nil {
		s.cfg.Logger.Warn("schedule_invalid", "id", e.id, "source", kdelay.Source(r.Topic, r.Partition, r.Offset), "err", err)
		return
	}
	e.sched, e.live = sched, true
	e.value, e.headers = detach(r.Value, user)
	s.inForce++
}

// detach copies a record's value and headers into one buffer of their own:
// as fetched, each is a slice of the whole batch the record came in, which
// a schedule kept for its life would keep alive, and every batch of the
// partition with it.
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

// applyProgress takes a progress record of e. Progress only moves forward:
// a record read back after this process wrote more since, or one a
// process that lost the partition wrote late (at-least-once), changes
// nothing. Versions are offsets of one partition, so the larger is the
// newer.
func (s *state) applyProgress(e *entry, pr progress) {
	e.done = pr.merge(e.done)
	if e.done.version == e.version {
		e.prev = nil // the change was handled
	}
}

// refresh sets when e next writes, once its partition is loaded.
func (s *state) refresh(e *entry, now time.Time) {
	if e.prev != nil && e.done.written.After(now) {
		s.changed[e] = true
	} else {
		e.prev = nil
		delete(s.changed, e)
	}
	e.next = time.Time{}
	if e.live {
		e.next = nextToWrite(e.sched, e.done.written, e.wrote())
	}
	s.requeue(e)
}

// wrote is how many occurrences e's record in force wrote.
func (e *entry) wrote() int64 {
	if e.done.version != e.version {
		return 0
	}
	return e.done.count
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

func (s *state) unqueue(e *entry) {
	if e.index >= 0 {
		heap.Remove(&s.queue, e.index)
	}
}

// wake is when the next occurrence is to be written; zero when none is.
func (s *state) wake() time.Time {
	if len(s.changed) > 0 {
		return time.Unix(0, 0) // now
	}
	if len(s.queue) == 0 {
		return time.Time{}
	}
	return s.queue[0].next.Add(-s.cfg.Lookahead)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// queue is a heap of entries by their next occurrence.
type queue []*entry

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *queue) Push(x any) {
	e := x.(*entry)
	e.index = len(*q)
	*q = append(*q, e)
}

// fix puts e in its place, in the queue or not.
func (q *queue) fix(e *entry) {
	if e.index < 0 {
		heap.Push(q, e)
	} else {
		heap.Fix(q, e.index)
	}
}

func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*q = old[:len(old)-1]
	return e
}
