package forwarder

import "time"

// An exact-mode forwarder runs its loop only when something it would act on
// may have changed, and otherwise sleeps in its fetch, which a new record
// ends at once. Between two cycles, only these change what a cycle would do:
//
//   - a fetch brings records: the poll returns them;
//   - a produce fails, or enough are acknowledged to unfill a full buffer:
//     the produce callback ends the poll (produce.go);
//   - a rebalance revokes, loses or assigns partitions: nudge;
//   - time reaches what wakeAt returns: a head or a held record falls due, a
//     paused partition must resume ahead of its buffered records, or work
//     handed on is due to be committed.
//
// Waking every CheckInterval regardless, as kdelay did before, cost most of
// an idle kdelay serve's CPU: 19 forwarders with the default levels, ten
// wake-ups a second each, a poll with its own context and goroutine every
// time, all to find nothing to do.

// wakeAt is when the loop of a ModeExact worker must run next, given the
// earliest head or held record due (soonest); the zero time if nothing but
// the events above can give it work. mu must be held.
func (w *worker) wakeAt(soonest, now time.Time) time.Time {
	wake := soonest
	for _, p := range w.parts {
		if p.notDue && len(p.queue) > 0 {
			wake = earliest(wake, w.releaseAt(p.queue[len(p.queue)-1], now).Add(-w.resumeLead()))
		}
	}
	return earliest(wake, w.commitWake(now))
}

// commitWake is when work handed on is due to be committed: the next
// CommitInterval after the last commit (or transaction end), the zero time if
// nothing waits to be committed. A successful produce does not wake the loop,
// so a record acknowledged while the loop sleeps is committed at this time.
// mu must be held.
func (w *worker) commitWake(now time.Time) time.Time {
	if w.txn != nil {
		if !w.txnProduced {
			return time.Time{}
		}
	} else if !w.committing && !w.uncommittedWork() {
		return time.Time{}
	}
	due := w.lastCommit.Add(w.cfg.CommitInterval)
	if w.txn != nil {
		due = w.txnEnd()
	}
	if !due.After(now) {
		// Due but not begun: the commit in flight holds the next one back,
		// or the transaction ends right after this cycle.
		return now.Add(w.cfg.CheckInterval)
	}
	return due
}

// uncommittedWork reports whether a partition has records taken and not yet
// acknowledged, or a commit point beyond its last commit. mu must be held.
func (w *worker) uncommittedWork() bool {
	for _, p := range w.parts {
		if p.pending() || p.commitPoint().Offset > p.committed {
			return true
		}
	}
	return false
}

// nudge makes the loop run a cycle now, or as soon as its current one ends:
// rebalance callbacks call it after changing the partitions, whose pauses,
// buffer and commits the loop must then look at again.
func (w *worker) nudge() {
	w.ackMu.Lock()
	defer w.ackMu.Unlock()
	w.nudged = true
	if w.wakeFn != nil {
		w.wakeFn()
	}
}
