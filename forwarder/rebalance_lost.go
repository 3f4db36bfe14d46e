package forwarder

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lost runs when this member's group session ended. Either the group moved
// on without it (a session timeout: another member may own the partitions
// already), or the client gave up on a coordinator that still holds it in the
// group: franz-go ends the session at the first heartbeat error it does not
// retry, and while a coordinator's broker is dead it sends FindCoordinator to
// any broker, the dead one included, whose refused dial it does not retry
// (issue 20). The partitions may then go to another member, which reads them
// from the group's last commit, and commits fail while the coordinator is
// away: every record handed on since would be delivered again.
//
// So it commits what was handed on, with the session that ended, before the
// client joins again. The broker takes that commit only while the session's
// generation is still the group's and the member still in it, that is before
// any other member can own the partitions; once the group moved on, it
// refuses it (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and
// nothing another member committed is overwritten.
//
// A record handed on and not yet acknowledged holds its partition's commit
// point, and every record behind it is read again from there, wherever the
// partition goes next, this process included. A node's failure holds the
// produces to the partitions it led until their leaders move, seconds in
// which those to the others go on. So it commits as the records in flight
// are acknowledged, until every lost partition is committed up to its first
// record held in memory (or where its reading came), the broker refuses for
// good, or
// as long as the group's own requests try while the coordinator does not
// answer (groupRetry) has passed: the failover of a coordinator and of the
// leaders takes seconds, and the member could not join again before it
// anyway. The coordinator drops a member SessionTimeout after its last
// heartbeat (or after its own load, after a failover), and refuses its
// commits from then on, which ends the wait.
//
// Where each partition's acknowledged work ended is also remembered: when the
// partition comes back to this process, which after a broker restart is the
// rule, it resumes there even when the commit was refused, rather than
// re-delivering everything since the last commit.
//
// In exactly-once delivery, acknowledged is not committed: the open
// transaction may abort, so the partitions only start again from their last
// commit, and nothing is committed from here.
func (w *worker) lost(ctx context.Context, ids []int32) {
	if w.txn == nil {
		// A worker told to stop gives up at once: its shutdown must not
		// wait behind this commit, which holds the client's commits back.
		if runCtx := w.loopContext(); runCtx != nil {
			ctx = runCtx
		}
		ctx, cancel := context.WithTimeout(ctx, groupRetry(w.cfg.SessionTimeout))
		defer cancel()
		w.commitLost(ctx, w.lostTargets(ids))
	}
	w.dropLost(ids)
}

// loopContext is the loop's context, nil before it runs.
func (w *worker) loopContext() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.runCtx
}

// lostTargets is, for each partition of ids this worker has read, where its
// reading came: its commit point comes no further while the client runs lost.
func (w *worker) lostTargets(ids []int32) map[int32]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	targets := map[int32]int64{}
	for _, id := range ids {
		if p, ok := w.parts[id]; ok && p.fetched {
			targets[id] = p.next.Offset
		}
	}
	return targets
}

// heldBy returns, for each partition, the first record of its window held in
// memory (a remainder, or a record waiting to retry a failed produce): the
// loop hands on none of a lost partition while the client runs lost (it is
// marked leaving, markLeaving), so the commit point stops there. mu must be
// held.
func (w *worker) heldBy() map[*partition]int64 {
	first := map[*partition]int64{}
	for e := range w.held.all() {
		if o, ok := first[e.part]; !e.done && (!ok || e.src.Offset < o) {
			first[e.part] = e.src.Offset
		}
	}
	return first
}

// lostCommitBackoff is the wait between two looks of commitLost at what was
// acknowledged; the client backs off between its own retries of a commit.
const lostCommitBackoff = 250 * time.Millisecond

// commitLost commits, with the group session that just ended, the commit
// points of the partitions of targets as they move, until each is committed
// at its target, the broker refuses a commit for good, or ctx ends.
func (w *worker) commitLost(ctx context.Context, targets map[int32]int64) {
	var taken map[int32]kgo.EpochOffset
	var err error
	for {
		parts, offsets := w.lostProgress(targets)
		if len(offsets) > 0 {
			res := w.sendCommit(ctx, parts, offsets)
			var gone bool
			if gone, err = w.takeLostCommit(res); gone {
				// The group moved on: another member may own the
				// partitions, and its commits stand.
				w.log.Info("commit_after_lost_refused", "err", err)
				return
			}
			if err == nil {
				taken = res.offsets
			}
		}
		if len(targets) == 0 {
			if taken != nil {
				w.log.Info("committed_after_lost", "offsets", taken)
			}
			return
		}
		select {
		case <-ctx.Done():
			w.log.Warn("commit_after_lost_failed", "short_of", targets, "err", err)
			return
		case <-time.After(lostCommitBackoff):
		}
	}
}

// lostProgress applies the acknowledgements that came, drops from targets the
// partitions committed at their target or at their first record held (or
// gone), and returns those of the others whose commit point moved past their
// last commit, with it.
func (w *worker) lostProgress(targets map[int32]int64) (map[int32]*partition, map[int32]kgo.EpochOffset) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applyAcks(w.cfg.NowFunc())
	held := w.heldBy()
	parts := map[int32]*partition{}
	offsets := map[int32]kgo.EpochOffset{}
	for id, target := range targets {
		p, ok := w.parts[id]
		if h, isHeld := held[p]; ok && isHeld {
			target = min(target, h)
		}
		if !ok || p.committed >= target {
			delete(targets, id)
			continue
		}
		if pt := p.commitPoint(); pt.Offset > p.committed {
			parts[id], offsets[id] = p, pt
		}
	}
	return parts, offsets
}

// takeLostCommit notes what the broker committed of res. gone reports a
// refusal for good (the group moved on); err is the last failure, one that
// may pass when gone is false.
func (w *worker) takeLostCommit(res commitResult) (gone bool, err error) {
	if res.err != nil {
		return false, res.err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range res.resp.Topics {
		for _, rp := range t.Partitions {
			if perr := kerr.ErrorForCode(rp.ErrorCode); perr != nil {
				err, gone = perr, gone || !kerr.IsRetriable(perr)
				continue
			}
			if p, ok := res.parts[rp.Partition]; ok {
				p.committed = max(p.committed, res.offsets[rp.Partition].Offset)
			}
		}
	}
	return gone, err
}

// dropLost forgets the partitions ids, remembering in at-least-once delivery
// where their acknowledged work ended.
func (w *worker) dropLost(ids []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.txn == nil {
		// Acknowledgements the loop has not applied yet count too: it
		// sleeps until something is due, not until a produce succeeds.
		w.applyAcks(w.cfg.NowFunc())
		w.rememberHandedOn(ids)
	}
	w.forget(ids)
	w.owners.set(w.source, ids, false)
	w.nudge()
}
