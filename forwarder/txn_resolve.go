package forwarder

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// An end of transaction that asked to commit and did not hear the broker
// confirm it has an outcome the client cannot know: the coordinator may have
// written the commit to its log and died before answering, and its successor
// completes the commit (issue 20: on a 3-node cluster, killing a broker had
// read_committed consumers see records twice, committed once by the
// transaction taken for aborted and again by its replay). The outcome is in
// the group: the transaction committed the partitions' commit points with
// its records, so the group's offsets say which way it went, once the
// transaction is no longer pending (OffsetFetch with RequireStable waits for
// that, as KIP-447 does for a new owner of the partitions).

// groupAtMost is, for each partition of tried, the highest offset the
// group can have held for it before the transaction: this worker's last
// commit, or where it began reading, which is the group's offset when the
// partition was assigned (or later, resumed after a loss). A partition the
// transaction did not move past that tells nothing: its group offset reads
// the same whichever way the transaction went (a partition just assigned,
// with nothing taken yet, tries its own starting offset). mu must be held.
func (w *worker) groupAtMost(tried map[int32]txnPoint) map[int32]txnPoint {
	before := make(map[int32]txnPoint, len(tried))
	for id := range tried {
		if p, ok := w.parts[id]; ok {
			before[id] = txnPoint{EpochOffset: kgo.EpochOffset{Epoch: -1, Offset: max(p.committed, p.from)}, meta: p.meta}
		}
	}
	return before
}

// committedAfterAll reports whether the transaction that tried to commit
// points committed after all. The client must have ended the transaction
// (abortOpen): ending it settles a pending outcome on the broker. before is
// each worker's groupAtMost from before it. Only a partition a worker still
// owns, moved past before, decides; with none, the transaction counts as
// aborted and is replayed, as before: at worst records are delivered twice,
// never lost. So does a group the broker refuses to read for a transaction
// timeout (an ACL): the process must not wait on it for ever. A group that
// does not answer (its coordinator away, the cluster without a quorum) is
// asked again for as long as it takes, every resolveBackoffMax at most: on
// the 3-node cluster two nodes down for 20s outlasted the timeout, and the
// replay of a transaction that had committed delivered its records twice
// (TestUnconfirmedCommitOutlastsAGroupAway).
func (t *txnLoop) committedAfterAll(run context.Context, points, before map[*worker]map[int32]txnPoint) bool {
	adm := kadm.NewClient(t.sess.Client())
	giveUp := time.Now().Add(txnTimeout(t.cfg))
	for backoff := retryBackoffMin; ; backoff = min(2*backoff, resolveBackoffMax) {
		ctx, cancel := context.WithTimeout(run, t.cfg.ShutdownTimeout)
		got, err := adm.FetchOffsets(kadm.RequireStable(ctx), t.cfg.Group)
		cancel()
		for w, pts := range points {
			if err == nil {
				err = unstable(got, w.source, w.owned(pts))
			}
		}
		if err == nil {
			decided := 0
			for w, pts := range points {
				committed, d := outcome(got, w.source, w.owned(pts), before[w])
				if decided += d; committed {
					t.log.Info("transaction_outcome_resolved", "committed", true, "decided_by", decided)
					return true
				}
			}
			t.log.Info("transaction_outcome_resolved", "committed", false, "decided_by", decided)
			return false
		}
		if run.Err() != nil {
			return false
		}
		if refusedForGood(err) && time.Now().After(giveUp) {
			t.log.Warn("transaction_outcome_unknown", "replay", true, "err", err)
			return false
		}
		t.log.Warn("transaction_outcome_unknown", "retry_in", backoff, "err", err)
		select {
		case <-run.Done():
			return false
		case <-time.After(backoff):
		}
	}
}

// resolveBackoffMax is the longest wait between two tries at ending a
// transaction, or at reading its outcome, while the cluster does not answer.
// Every stage waits for them, so the wait after the cluster is back is all
// lateness: with retryBackoffMax's 30s, a process forwarded nothing for 10s
// after a quorum came back. One request a second to a cluster that is away
// costs nothing worth saving.
const resolveBackoffMax = time.Second

// refusedForGood reports whether err is the broker's answer that it will not
// do what was asked (an ACL, a bad request), which asking again does not
// change, rather than a broker that is away, moving or not ready.
func refusedForGood(err error) bool {
	var ke *kerr.Error
	return errors.As(err, &ke) && !ke.Retriable
}

// owned is the points of partitions the worker still owns.
func (w *worker) owned(points map[int32]txnPoint) map[int32]txnPoint {
	w.mu.Lock()
	defer w.mu.Unlock()
	owned := make(map[int32]txnPoint, len(points))
	for id, o := range points {
		if _, ok := w.parts[id]; ok {
			owned[id] = o
		}
	}
	return owned
}

// unstable is the error of a partition of tried whose offset is still
// pending in a transaction, which the read has to wait out. The others'
// pending offsets are other processes' open transactions, which say nothing
// of this one's and, in a fleet, are open at almost any moment: waiting on
// them held every stage of a process about a second in a rolling restart.
func unstable(got kadm.OffsetResponses, topic string, tried map[int32]txnPoint) error {
	for p := range tried {
		if o, ok := got.Lookup(topic, p); ok && errors.Is(o.Err, kerr.UnstableOffsetCommit) {
			return o.Err
		}
	}
	return nil
}

// outcome reads the transaction's outcome from the group's offsets: it
// committed if a partition it moved past before[id] is at the offset and
// metadata it tried; decided is how many partitions told (committed, or
// still at most before[id]). A partition whose offset stays and whose skips
// changed (txn_skips.go) tells by its metadata alone.
func outcome(got kadm.OffsetResponses, topic string, tried map[int32]txnPoint, before map[int32]txnPoint) (committed bool, decided int) {
	for id, o := range tried {
		b, ok := before[id]
		if !ok {
			continue
		}
		moved := o.Offset > b.Offset
		if !moved && (o.Offset != b.Offset || o.meta == b.meta) {
			continue
		}
		r, ok := got.Lookup(topic, id)
		if !ok || r.Err != nil {
			continue
		}
		switch {
		case r.At == o.Offset && r.Metadata == o.meta:
			return true, decided + 1
		case moved && r.At <= b.Offset, !moved && r.At == b.Offset && r.Metadata == b.meta:
			decided++
		}
	}
	return false, decided
}
