package forwarder

import (
	"context"
	"time"
)

// shutdown runs once fetching has stopped. It hands held records back to
// the ingress (handBack; those due within handBackAfter, and retries, it
// delivers as they fall due), waits for in-flight produces, commits, and
// leaves the group, all within ShutdownTimeout. A clean stop thus leaves
// nothing to re-deliver; whatever the timeout cuts off stays uncommitted and
// is re-read by the next owner.
func (w *worker) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
	defer cancel()
	if !w.cl.own {
		// The shared client fetches for the other stages on: nothing
		// more for this one (a dropped level drained, or a stop).
		w.cl.pauseSource()
	}
	release := w.producing()
	w.mu.Lock()
	// The source is paused: holding the poll for it would only delay the
	// other stages. Released again once stopped, in case a fetch taken
	// meanwhile held it anew.
	w.setHolding(false)
	w.handBack(func(*partition) bool { return true }, w.cfg.NowFunc())
	w.mu.Unlock()
	release()
	w.drainHeld(ctx)
	if err := w.cl.flush(ctx); err != nil {
		w.log.Warn("flush_on_shutdown_failed", "err", err)
	}
	// Exactly-once, the last transaction ends once every stage has stopped
	// (txnLoop.last).
	if w.txn == nil {
		w.mu.Lock()
		w.applyAcks(w.cfg.NowFunc())
		w.commitNow(ctx)
		w.mu.Unlock()
	}
	// The final commit waited for a background one in flight; its goroutine
	// is done or about to be, and must be before the client closes.
	w.commits.wg.Wait()
	w.scans.wg.Wait() // it ends with the loop's context
	w.cl.close()
	// What it still counts would be lent to no one else: a dropped level's
	// forwarder stops while the others run on.
	w.mu.Lock()
	w.stopped = true
	w.setHolding(false)
	w.buf.detach()
	w.cl.wait.need(w, time.Time{})
	w.mu.Unlock()
}

// drainHeld produces held records at their due times until none is left.
func (w *worker) drainHeld(ctx context.Context) {
	w.drain(ctx, func(*entry) bool { return true })
}

// drain produces held records as they fall due until none that wait is
// left, or ctx ends. Records that wait are drained at their due times; the
// others are released as the loop would.
func (w *worker) drain(ctx context.Context, wait func(*entry) bool) {
	for {
		release := w.producing()
		w.mu.Lock()
		now := w.cfg.NowFunc()
		w.applyAcks(now)
		w.releaseHeld(now, true)
		var soonest time.Time
		for e := range w.held.all() {
			if !e.part.gone && wait(e) {
				soonest = earliest(soonest, e.at)
			}
		}
		w.mu.Unlock()
		release()
		if soonest.IsZero() {
			return
		}
		timer := time.NewTimer(soonest.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}
