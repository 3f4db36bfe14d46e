package forwarder

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// handoff is what the group's callbacks, which run on the client's
// goroutines while the loop may hold the worker's mu, leave for the loop or
// take from it, under mu of its own.
type handoff struct {
	mu       sync.Mutex
	resumeAt map[int32]kgo.EpochOffset // see lost
	resumed  map[int32]kgo.EpochOffset // see adjustOffsets
	inherit  map[int32]inherited       // exactly-once: the commits partitions start from (txn_skips.go)
}

// revoked runs when partitions move to another member: it hands the records
// of those partitions held below the smallest level back to the ingress
// (handBack; one due within handBackAfter it delivers), waits for what is
// in flight, commits what was handed on, and forgets the partitions. A held
// record holds its partition's commit point, so handing the partition over
// before handing it on would have the new owner deliver every record behind
// it again. The move waits only for those produces, never more than
// ShutdownTimeout; what the timeout cuts off stays uncommitted and is
// re-read by the new owner.
//
// In exactly-once delivery it only forgets them: nothing can be committed
// from here (the transaction session holds its lock while it calls revoked),
// and the session aborts the open transaction at its next end, which rewinds
// the partitions kept.
func (w *worker) revoked(ctx context.Context, ids []int32) {
	if w.txn != nil {
		w.lost(ctx, ids)
		return
	}
	fctx, cancel := context.WithTimeout(ctx, w.cfg.ShutdownTimeout)
	defer cancel()
	revoked := map[int32]bool{}
	for _, id := range ids {
		revoked[id] = true
	}
	w.mu.Lock()
	w.handBack(func(p *partition) bool { return revoked[p.id] }, w.cfg.NowFunc())
	w.mu.Unlock()
	w.drain(fctx, func(e *entry) bool { return revoked[e.part.id] && e.attempts == 0 })
	if err := w.cl.flush(fctx); err != nil {
		w.log.Warn("flush_on_revoke_failed", "err", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applyAcks(w.cfg.NowFunc())
	w.commitNow(fctx)
	w.forget(ids)
	w.owners.set(w.source, ids, false)
	w.nudge()
}

// rememberHandedOn notes each partition's commit point, for adjustOffsets.
// mu must be held.
func (w *worker) rememberHandedOn(ids []int32) {
	w.handoff.mu.Lock()
	defer w.handoff.mu.Unlock()
	for _, id := range ids {
		if p, ok := w.parts[id]; ok && p.fetched {
			if w.handoff.resumeAt == nil {
				w.handoff.resumeAt = map[int32]kgo.EpochOffset{}
			}
			w.handoff.resumeAt[id] = p.commitPoint()
		}
	}
}

// adjustOffsets runs when partitions are assigned, with the offsets the
// source's would be fetched from (the group's committed ones), which it
// changes in place. A partition this process lost starts at the later of
// that and where its acknowledged work ended: every record before that point was delivered (or handed to its next
// topic) and acknowledged by the broker, so skipping it loses nothing; if
// another member went further and committed, its offset is the later one.
func (w *worker) adjustOffsets(_ context.Context, offsets map[int32]kgo.Offset) {
	// The loop applies resumed at its next cycle, which commits it.
	defer w.nudge()
	w.handoff.mu.Lock()
	defer w.handoff.mu.Unlock()
	for id, o := range offsets {
		pt, ok := w.handoff.resumeAt[id]
		if !ok {
			continue
		}
		delete(w.handoff.resumeAt, id)
		if pt.Offset > o.EpochOffset().Offset {
			w.log.Info("resume_after_lost", "partition", id, "committed", o.EpochOffset().Offset, "from", pt.Offset)
			offsets[id] = kgo.NewOffset().At(pt.Offset)
			if w.handoff.resumed == nil {
				w.handoff.resumed = map[int32]kgo.EpochOffset{}
			}
			w.handoff.resumed[id] = pt
		}
	}
}

// applyResumed makes the offsets partitions resumed at their commit points
// until records are taken, so that the next commit records them: otherwise,
// with no new record, the group would keep its older offset and a crash
// would re-deliver what was skipped. mu must be held.
func (w *worker) applyResumed() {
	w.handoff.mu.Lock()
	defer w.handoff.mu.Unlock()
	for id, pt := range w.handoff.resumed {
		if p := w.partition(id, pt.Offset); !p.fetched {
			p.next, p.fetched = pt, true
		}
		delete(w.handoff.resumed, id)
	}
}

// forget drops partitions, resuming them so that they are fetched if they
// come back: a pause outlives the assignment.
func (w *worker) forget(ids []int32) {
	w.handoff.mu.Lock()
	for _, id := range ids {
		delete(w.handoff.resumed, id) // not ours any more: never commit for it
		delete(w.handoff.inherit, id)
	}
	w.handoff.mu.Unlock()
	for _, id := range ids {
		p, ok := w.parts[id]
		if !ok {
			continue
		}
		p.gone = true
		w.forgetBuffered(p)
		w.forgetHeld(p)
		delete(w.parts, id)
		if p.paused {
			w.cl.resume(id)
		}
	}
}
