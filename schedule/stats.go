package schedule

import "time"

// Stats are what a Scheduler holds and has written, for metrics. They
// count this process's share of the schedules: a fleet's are the sum over
// its processes.
type Stats struct {
	// Schedules are the schedules in force in the partitions this process
	// owns.
	Schedules int

	// Next is the earliest occurrence of those this process has yet to
	// write into the ingress: those due within Lookahead are written
	// already. Zero when there is none.
	Next time.Time

	// Occurrences are the occurrences this process wrote into the ingress
	// (acknowledged; committed, in exactly-once), each then delivered at
	// its time by the forwarder. Since the process started.
	Occurrences int64

	// Late are those of Occurrences written after their time, so
	// delivered late: missed while no kdelay could write them (see
	// kdelay.HeaderMissed), or written by a scheduler behind.
	Late int64

	// IndexBytes are what the scheduler holds for the schedule ids of the
	// partitions this process owns (docs/SCHEDULES.md states the bound):
	// their slots, hash tables and queues, as allocated.
	IndexBytes int64
}

// Stats returns what s holds and has written now. It may be called
// concurrently with Run.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Schedules: s.st.inForce, Occurrences: s.occurrences, Late: s.late, IndexBytes: s.st.indexBytes()}
	if p, h := s.st.soonest(); p != nil {
		st.Next = fromSeconds(p.x.slot(h).next)
	}
	return st
}

// IndexBytes is Stats().IndexBytes as the scheduler last changed its index,
// read without waiting for the scheduler: the forwarder's
// Config.SharedBytes, which every forwarder calls on each turn of its loop.
func (s *Scheduler) IndexBytes() int64 { return s.index.Load() }

// noteIndex keeps IndexBytes up to date after the index changed. mu must be
// held.
func (s *Scheduler) noteIndex() { s.index.Store(s.st.indexBytes()) }
