package forwarder

import (
	"context"
	"time"
)

// An exact-mode forwarder runs its loop only when something it would act on
// may have changed, and otherwise sleeps on its timer and its wake channel.
// Between two cycles, only these change what a cycle would do, and each
// sends to the channel (wake):
//
//   - a fetch brings records: the poll loop's take (poll.go);
//   - a produce fails, or enough are acknowledged to unfill a full buffer:
//     the produce callback (produce.go);
//   - a rebalance revokes, loses or assigns partitions: nudge;
//   - a scan of the level ends (command_scan.go);
//   - time reaches what wakeAt returns, on the timer: a head or a held
//     record falls due, a paused partition must resume ahead of its buffered
//     records, or work handed on is due to be committed.
//
// Waking every CheckInterval regardless cost most of an idle kdelay serve's
// CPU: 19 forwarders with the default levels, ten wake-ups a second each,
// all to find nothing to do.

// wakeAt is when the loop of a ModeExact worker must run next, given the
// earliest head or held record due (soonest); the zero time if nothing but
// the events above can give it work. mu must be held.
func (w *worker) wakeAt(soonest, now time.Time) time.Time {
	return earliest(earliest(soonest, w.resumeAt(now)), w.commitWake(now))
}

// resumeAt is when the first partition paused as not due must resume, ahead
// of its buffered records; the zero time if none is. mu must be held.
func (w *worker) resumeAt(now time.Time) time.Time {
	var at time.Time
	for _, p := range w.parts {
		// A partition leaving is its callback's, which nudges when done:
		// its notDue is no longer kept up to date (releaseHeads).
		if p.notDue && !p.leaving && len(p.queue) > 0 {
			at = earliest(at, w.releaseAt(p.queue[len(p.queue)-1], now).Add(-w.resumeLead()))
		}
	}
	return at
}

// promptFrom is from when the worker needs its client's fetches prompt
// (fetch_wait.go), the zero time if never: when its first partition paused
// as not due resumes, and, while it is full, when room may free, since its
// partitions then resume. Room frees as the broker acknowledges records on
// their way, or as the pool drains for one that may borrow (at once:
// others' acknowledgements drain it), and as records held for their time
// fall due: from the first due, not from when it filled. A level full of
// records due in hours needs nothing for hours (with a million pending, the
// 2h level stayed full, and kept the wait short for good). mu must be held.
func (w *worker) promptFrom(now time.Time) time.Time {
	if w.buf.holding {
		return atOnce // what it holds is on its way
	}
	at := w.resumeAt(now)
	if !w.buf.full {
		return at
	}
	if w.mayBorrow() {
		return atOnce
	}
	if len(w.held) > 0 {
		at = earliest(at, time.Unix(0, w.held[0].at))
	}
	for _, p := range w.parts {
		switch {
		case p.flying > 0:
			return atOnce
		case len(p.queue) > 0:
			at = earliest(at, w.releaseAt(p.queue[0], now))
		}
	}
	return at
}

// tellWait tells the client's fetch wait what the worker needs.  mu must be
// held.
func (w *worker) tellWait(now time.Time) {
	if w.cl != nil {
		w.cl.wait.need(w, w.promptFrom(now))
	}
}

// commitWake is when work handed on is due to be committed: the next
// CommitInterval after the last commit (or transaction end), the zero time if
// nothing waits to be committed. A successful produce does not wake the loop,
// so a record acknowledged while the loop sleeps is committed at this time.
// mu must be held.
func (w *worker) commitWake(now time.Time) time.Time {
	if w.txn != nil {
		return time.Time{} // the transaction loop's (txn_loop.go)
	}
	if !w.commits.inFlight && !w.uncommittedWork() {
		return time.Time{}
	}
	due := w.commits.last.Add(w.cfg.CommitInterval)
	if !due.After(now) {
		// Due but not begun: the commit in flight holds the next one back,
		// or the transaction ends right after this cycle.
		return now.Add(w.cfg.CheckInterval)
	}
	return due
}

// uncommittedWork reports whether a partition has records taken and not yet
// acknowledged, or a commit point beyond its last commit: not one leaving,
// which its callback commits. mu must be held.
func (w *worker) uncommittedWork() bool {
	for _, p := range w.parts {
		if !p.leaving && (p.pending() || p.commitPoint().Offset > p.committed) {
			return true
		}
	}
	return false
}

// nudge makes the loop run a cycle now, or as soon as its current one ends:
// rebalance callbacks call it after changing the partitions, whose pauses,
// buffer and commits the loop must then look at again.
func (w *worker) nudge() { w.wake() }

// wake makes the loop run a cycle now, or as soon as its current one ends.
// It never blocks: wakeCh holds one wake-up, and one pending is enough, since
// the cycle it starts looks at everything. A wake-up sent while a cycle runs
// stays pending and starts another, so none is lost to a cycle that looked
// before the event. A worker made outside newWorker has no channel: a send
// on nil never proceeds, and the default drops it.
func (w *worker) wake() {
	select {
	case w.wakeCh <- struct{}{}:
	default:
	}
}

// sleep waits until wake (forever if zero), a wake-up, or the end of ctx.
// It does not wait at all while a failure or enough acknowledged bytes are
// pending: their callback may have come during the cycle, before wakeAfter
// was set, and found no reason to wake.
func (w *worker) sleep(ctx context.Context, timer *time.Timer, wake time.Time) {
	if w.inbox.due() {
		return
	}
	var at <-chan time.Time
	if !wake.IsZero() {
		timer.Reset(time.Until(wake))
		defer timer.Stop()
		at = timer.C
	}
	select {
	case <-ctx.Done():
	case <-w.wakeCh:
	case <-at:
	}
}
