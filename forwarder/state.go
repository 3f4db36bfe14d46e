package forwarder

import "time"

// LevelState is what one forwarder of this process holds now: what an
// operator's gauges and a readiness check read (package admin), where
// Observer reports events.
type LevelState struct {
	Level string // the level's name, IngressLevel for the ingress router
	Topic string // the topic it forwards from
	Group string // its consumer group

	// Assigned is true once the group has given this forwarder its
	// partitions (none, when the group has more members than partitions),
	// and false again from when it loses them (its session ended, as while
	// the broker is unreachable) until it joins again.
	Assigned bool

	// Partitions is how many partitions it holds records of; Paused, how
	// many of those it does not fetch, because their buffered records are
	// not due soon or it may hold no more of MaxBufferedBytes.
	Partitions, Paused int

	// OldestDue is when the oldest record it holds and has not handed on
	// (fetched, taken, or produced and not yet acknowledged) was due to
	// leave the topic: its timestamp plus the level's delay, or its own
	// due time for a remainder held below the smallest level. The zero
	// time when it holds none. A time in the past is a record waiting
	// longer than it should: a stuck partition, a produce being retried.
	OldestDue time.Time

	// Buffered is what its records held now count against
	// MaxBufferedBytes (see Config.MaxBufferedBytes); Borrowed, how much of
	// it is borrowed from the pool the forwarders share beyond its reserve.
	Buffered, Borrowed int64

	// Stuck says why the forwarder is stuck (see Config.StuckAfter), ""
	// when it is not; StuckReason is StuckProduce, StuckTransaction or
	// StuckNoProgress then.
	Stuck, StuckReason string

	Stats Stats // what it did so far
}

// Levels returns the state of every forwarder started so far, the ingress
// first, then the levels in order, then dropped levels being drained. It
// takes each forwarder's lock briefly, as Stats does.
func (f *Forwarder) Levels() []LevelState {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.NowFunc()
	states := make([]LevelState, 0, len(f.workers))
	for _, w := range f.workers {
		states = append(states, w.state(now))
	}
	return states
}

func (w *worker) state(now time.Time) LevelState {
	s := LevelState{Level: w.level, Topic: w.source, Group: w.group, Assigned: w.assigned.Load()}
	w.mu.Lock()
	defer w.mu.Unlock()
	s.Stats = w.stats
	s.Buffered, s.Borrowed = w.buf.bytes, max(w.buf.bytes-w.buf.limit, 0)
	for _, p := range w.parts {
		s.Partitions++
		if p.paused {
			s.Paused++
		}
		s.OldestDue = earliest(s.OldestDue, w.oldestDue(p, now))
	}
	w.stuck(&s, now)
	return s
}

// oldestDue is when the oldest record p holds and has not handed on was due
// to leave; the zero time if none. Records are due in offset order, except
// those taken and held: a remainder waits for its own due time, and a
// record being retried was due when it was taken.
func (w *worker) oldestDue(p *partition, now time.Time) (at time.Time) {
	for _, e := range p.window {
		switch {
		case e.done:
		case e.src == nil: // acknowledged and not yet applied
		case !e.due.IsZero():
			at = earliest(at, e.due)
		default:
			at = earliest(at, w.releaseAt(e.src, now))
		}
	}
	if len(p.queue) > 0 {
		at = earliest(at, w.releaseAt(p.queue[0], now))
	}
	return at
}
