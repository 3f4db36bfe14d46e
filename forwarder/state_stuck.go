package forwarder

import (
	"fmt"
	"time"
)

// A forwarder is stuck when it holds a record past its due time and has
// handed nothing on for StuckAfter: at least once, no produce was
// acknowledged; exactly once, no transaction committed (its produces are
// acknowledged while every transaction aborts). A forwarder alive but stuck
// is what a cluster that lost its quorum once left behind (issue 20); a
// readiness probe and an alert need to see it, with why.

// Stuck reasons, the values of LevelState.StuckReason and of the reason
// label of kdelay_stuck.
const (
	StuckProduce     = "produce"     // its produces fail
	StuckTransaction = "transaction" // its transactions abort
	StuckNoProgress  = "no_progress" // nothing fails, and nothing moves
)

// handing is what a worker knows of its handing on, under its mu.
type handing struct {
	at      time.Time // when it last handed on
	failure failure   // the last error since then
	// Exactly once: the earliest due time among the records produced since
	// the last commit, aborted ones included; zero after a commit.
	uncommittedDue time.Time
}

// progress is a forwarder handing on: a produce acknowledged (at least
// once) or a transaction committed (exactly once). mu must be held.
func (w *worker) progress(now time.Time) {
	w.handing = handing{at: now}
}

// failure is the last error a forwarder met since it last handed on.
type failure struct {
	reason string // StuckProduce or StuckTransaction
	err    error
}

// noteFailure notes err as the last failure. mu must be held.
func (w *worker) noteFailure(reason string, err error) {
	if err != nil {
		w.handing.failure = failure{reason, err}
	}
}

// stuck fills s.Stuck and s.StuckReason if the forwarder is stuck at now;
// s.OldestDue must be set. mu must be held.
func (w *worker) stuck(s *LevelState, now time.Time) {
	// Exactly once, a record acknowledged is not handed on until its
	// transaction commits.
	due := earliest(s.OldestDue, w.handing.uncommittedDue)
	if due.IsZero() {
		return
	}
	late, idle := now.Sub(due), now.Sub(w.handing.at)
	if late <= w.cfg.StuckAfter || idle <= w.cfg.StuckAfter {
		return
	}
	s.StuckReason = StuckNoProgress
	s.Stuck = fmt.Sprintf("holds a record %s past its due time and handed nothing on for %s", late.Round(time.Second), idle.Round(time.Second))
	if f := w.handing.failure; f.err != nil {
		s.StuckReason = f.reason
		s.Stuck += fmt.Sprintf("; last error (%s): %v", f.reason, f.err)
	}
}
