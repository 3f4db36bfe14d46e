package forwarder

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commit commits, for every partition whose commit point moved, the lowest
// offset not yet handed on. It runs at most every CommitInterval unless
// forced; mu must be held.
func (w *worker) commit(ctx context.Context, now time.Time, force bool) {
	if !force && now.Sub(w.lastCommit) < w.cfg.CommitInterval {
		return
	}
	w.lastCommit = now
	offsets := map[int32]kgo.EpochOffset{}
	for id, p := range w.parts {
		if pt := p.commitPoint(); pt.Offset > p.committed {
			offsets[id] = pt
		}
	}
	if len(offsets) == 0 {
		return
	}
	w.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{w.source: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				// Cut short by shutdown, which commits again; otherwise the
				// next commit carries the same offsets.
				if !errors.Is(err, context.Canceled) {
					w.log.Warn("commit_failed", "err", err)
				}
				return
			}
			w.log.Debug("committed", "offsets", offsets)
			for _, t := range resp.Topics {
				for _, rp := range t.Partitions {
					p, ok := w.parts[rp.Partition]
					if ok && rp.ErrorCode == 0 {
						p.committed = offsets[rp.Partition].Offset
					}
				}
			}
		})
}

// revoked runs when partitions move to another member: it waits for what is
// in flight, commits what was handed on, and forgets the partitions. Held
// records are not committed, so the new owner re-reads and re-holds them.
func (w *worker) revoked(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	fctx, cancel := context.WithTimeout(ctx, w.cfg.ShutdownTimeout)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		w.log.Warn("flush_on_revoke_failed", "err", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applyAcks(w.cfg.NowFunc())
	w.commit(fctx, w.cfg.NowFunc(), true)
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
		delete(w.parts, id)
		if p.paused {
			w.cl.ResumeFetchPartitions(map[string][]int32{w.source: {id}})
		}
	}
}

// shutdown runs once fetching has stopped. It delivers held records as they
// fall due (they are due within the smallest level), waits for in-flight
// produces, commits, and leaves the group, all within ShutdownTimeout. A
// clean stop thus leaves nothing to re-deliver; whatever the timeout cuts off
// stays uncommitted and is re-read by the next owner.
func (w *worker) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
	defer cancel()
	w.drainHeld(ctx)
	if err := w.cl.Flush(ctx); err != nil {
		w.log.Warn("flush_on_shutdown_failed", "err", err)
	}
	w.mu.Lock()
	w.applyAcks(w.cfg.NowFunc())
	w.commit(ctx, w.cfg.NowFunc(), true)
	w.mu.Unlock()
	w.cl.CloseAllowingRebalance()
}

// drainHeld produces held records at their due times until none is left.
func (w *worker) drainHeld(ctx context.Context) {
	for {
		w.mu.Lock()
		now := w.cfg.NowFunc()
		w.applyAcks(now)
		soonest := w.releaseHeld(now)
		w.mu.Unlock()
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
