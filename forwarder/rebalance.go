package forwarder

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// revoked runs when partitions move to another member: it waits for what is
// in flight, commits what was handed on, and forgets the partitions. Held
// records are not committed, so the new owner re-reads and re-holds them.
//
// In exactly-once delivery it only forgets them: nothing can be committed
// from here (the transaction session holds its lock while it calls revoked),
// and the session aborts the open transaction at its next end, which rewinds
// the partitions kept.
func (w *worker) revoked(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	if w.txn != nil {
		w.lost(ctx, cl, lost)
		return
	}
	fctx, cancel := context.WithTimeout(ctx, w.cfg.ShutdownTimeout)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		w.log.Warn("flush_on_revoke_failed", "err", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applyAcks(w.cfg.NowFunc())
	w.commitNow(fctx)
	w.forget(lost[w.source])
}

// lost runs when the group moved on without us (a session timeout): another
// member may already own the partitions, so nothing is committed.
func (w *worker) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.forget(lost[w.source])
}

// forget drops partitions, resuming them so that they are fetched if they
// come back: a pause outlives the assignment.
func (w *worker) forget(ids []int32) {
	for _, id := range ids {
		p, ok := w.parts[id]
		if !ok {
			continue
		}
		p.gone = true
		w.forgetBuffered(p)
		delete(w.parts, id)
		if p.paused {
			w.cl.ResumeFetchPartitions(map[string][]int32{w.source: {id}})
		}
	}
}
