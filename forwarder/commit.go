package forwarder

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commits is a worker's background commit: one in flight at a time.
type commits struct {
	last     time.Time      // when the last one began; under the worker's mu
	inFlight bool           // one is in flight; under the worker's mu
	wg       sync.WaitGroup // the one in flight, which shutdown and a revoke wait for
	// A synchronous commit is being made (commitNow): none begins in the
	// background meanwhile. Under the worker's mu.
	syncing bool
}

// commitResult is what one commit request came back with.
type commitResult struct {
	parts   map[int32]*partition // the partitions committed, as they were when the commit began
	offsets map[int32]kgo.EpochOffset
	resp    *kmsg.OffsetCommitResponse
	err     error
}

// commit applies the result of the last background commit and, at most every
// CommitInterval, starts the next one for every partition whose commit point
// moved. mu must be held.
//
// The commit runs on its own goroutine, never under mu: a commit round trip
// (or a group rebalance, which holds commits back) must not delay a due
// record, nor Stats. One commit is in flight at a time, so a slow broker gets
// one request, and the next carries whatever moved meanwhile. What this
// cannot spare is the client's other requests behind the commit on its
// connection to the group's coordinator, which Kafka answers in order: a
// heartbeat, or the metadata of a target the client has not produced to yet.
func (w *worker) commit(now time.Time) {
	w.applyCommit()
	w.applyResumed()
	if w.commits.inFlight || w.commits.syncing || now.Sub(w.commits.last) < w.cfg.CommitInterval {
		return
	}
	parts, offsets := w.uncommitted()
	for id, p := range parts {
		// Its callback commits it (commitNow, commitLost): a background
		// commit sent after that one would move it back.
		if p.leaving {
			delete(parts, id)
			delete(offsets, id)
		}
	}
	if len(offsets) == 0 {
		return
	}
	w.commits.last = now
	w.commits.inFlight = true
	w.commits.wg.Go(func() {
		// Not the loop's context: cancelling a commit kills its connection,
		// and the broker could then take the shutdown's final commit before
		// this older one. The timeout bounds how long that final commit waits
		// behind it.
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
		defer cancel()
		res := w.sendCommit(ctx, parts, offsets)
		w.inbox.putCommit(res)
	})
}

// commitNow commits synchronously within ctx, on revoke and shutdown: the
// offsets must be committed before the partitions move or the client closes.
// mu must be held; it is released while the commit is on its way, so that the
// loop hands on the records of the partitions that stay (a revoke takes some,
// and every stage commits on every revoke: stageCallbacks) and Stats
// answers. The partitions leaving are marked so (markLeaving): the loop
// leaves them alone meanwhile.
//
// It first waits for a background commit in flight, which needs only the
// inbox's lock to finish, and no other begins until it is done (syncing).
// The client orders only commits it has been given: a background commit
// whose goroutine started but has not reached the client yet (or waits, as
// every commit does, for a join to end) could otherwise be sent after this
// one and move the group's offsets back, and the next owner would deliver
// again what lies between. The wait is short: that commit runs within
// ShutdownTimeout, and no join runs while a revoke callback does (franz-go
// calls it before the join, or after the sync).
func (w *worker) commitNow(ctx context.Context) {
	w.commits.syncing = true
	defer func() { w.commits.syncing = false }()
	w.mu.Unlock()
	w.commits.wg.Wait()
	w.mu.Lock()
	w.applyCommit()
	parts, offsets := w.uncommitted()
	if len(offsets) == 0 {
		return
	}
	w.mu.Unlock()
	res := w.sendCommit(ctx, parts, offsets)
	w.mu.Lock()
	w.recordCommit(res)
}

// uncommitted returns, for every partition whose commit point moved since the
// last commit, the partition and its commit point.
func (w *worker) uncommitted() (map[int32]*partition, map[int32]kgo.EpochOffset) {
	parts := map[int32]*partition{}
	offsets := map[int32]kgo.EpochOffset{}
	for id, p := range w.parts {
		if pt := p.commitPoint(); pt.Offset > p.committed {
			parts[id], offsets[id] = p, pt
		}
	}
	return parts, offsets
}

func (w *worker) sendCommit(ctx context.Context, parts map[int32]*partition, offsets map[int32]kgo.EpochOffset) commitResult {
	res := commitResult{parts: parts, offsets: offsets}
	res.resp, res.err = w.cl.commit(ctx, offsets)
	return res
}

// applyCommit records the result of a finished background commit, if any.
// mu must be held.
func (w *worker) applyCommit() {
	if res := w.inbox.takeCommit(); res != nil {
		w.commits.inFlight = false
		w.recordCommit(*res)
	}
}

// recordCommit notes what the broker committed and logs what it did not; the
// next commit carries the same offsets again. mu must be held.
func (w *worker) recordCommit(res commitResult) {
	if res.err != nil {
		// Cut short by shutdown, which commits again.
		if !errors.Is(res.err, context.Canceled) {
			w.log.Warn("commit_failed", "err", res.err)
		}
		return
	}
	for _, t := range res.resp.Topics {
		for _, rp := range t.Partitions {
			offset := res.offsets[rp.Partition].Offset
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				w.log.Warn("commit_failed", "partition", rp.Partition, "offset", offset, "err", err)
				continue
			}
			if p, ok := res.parts[rp.Partition]; ok {
				p.committed = max(p.committed, offset)
			}
		}
	}
	w.log.Debug("committed", "offsets", res.offsets)
}
