package forwarder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnLoop owns the one open transaction of a process in exactly-once
// delivery: every stage's worker produces into it, and the loop alone
// begins and ends it (docs/design/one-client.md, "One transaction"). One
// transaction, not one a stage, because franz-go commits a transaction's
// offsets for its own consumer's group only, and the process reads every
// stage in one group with one client: one producer id, and one EndTxn and
// one set of markers each CommitLinger for every stage.
//
// What it costs: an abort (a produce failed behind acknowledged records, a
// rebalance that took a partition, a fence) replays every stage's work since
// the last commit, not one stage's; and every stage waits for one End.
type txnLoop struct {
	cfg     *Config
	sess    *kgo.GroupTransactSession
	gate    *pollGate
	workers []*worker
	readers []*ReaderClient // produce into the transaction too (ReaderClient.Produce)
	log     *slog.Logger

	// barrier keeps produces apart from End and Begin, which franz-go
	// forbids beside a Produce: workers hold it shared around whatever may
	// produce (producing), the loop holds it alone from settle to Begin.
	// Taken before worker.mu, never while holding it.
	barrier sync.RWMutex

	mu         sync.Mutex
	produced   bool      // something was produced in the open transaction
	first      time.Time // when the first of it was
	lastCommit time.Time // when the last End began
	wakeCh     chan struct{}

	// taken counts the group's callbacks that took partitions away
	// (stageCallbacks); takenSeen is its count when the last End returned.
	taken     *atomic.Uint64
	takenSeen uint64
}

func newTxnLoop(cfg *Config, sess *kgo.GroupTransactSession, gate *pollGate, workers []*worker, taken *atomic.Uint64) *txnLoop {
	return &txnLoop{cfg: cfg, sess: sess, gate: gate, workers: workers, log: cfg.Logger, wakeCh: make(chan struct{}, 1), taken: taken}
}

// noteProduced marks the open transaction as holding a produce, the first
// one starting its linger. A worker calls it under its mu.
func (t *txnLoop) noteProduced(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.produced {
		t.produced, t.first = true, now
		select {
		case t.wakeCh <- struct{}{}:
		default:
		}
	}
}

// endAt is when the open transaction ends: CommitLinger after its first
// produce, or CommitInterval after the last end if that is sooner; the zero
// time while it holds no produce. Ending it at every CommitInterval alone
// would show a record up to a CommitInterval late to a read_committed
// consumer.
func (t *txnLoop) endAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.produced {
		return time.Time{}
	}
	return earliest(t.lastCommit.Add(t.cfg.CommitInterval), t.first.Add(t.cfg.CommitLinger))
}

// run ends the open transaction whenever it is due, until ctx ends or the
// producer cannot go on. The last transaction is ended by last, once every
// worker has stopped.
func (t *txnLoop) run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		at := t.endAt()
		if !at.IsZero() && !at.After(t.cfg.NowFunc()) {
			if err := t.end(ctx); err != nil {
				return err
			}
			continue
		}
		var fire <-chan time.Time
		if !at.IsZero() {
			timer.Reset(at.Sub(t.cfg.NowFunc()))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.wakeCh:
		case <-fire:
		}
		timer.Stop()
	}
}

// last ends the last transaction when the workers have stopped: committed,
// or aborted and replayed by the next owner.
func (t *txnLoop) last() {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.ShutdownTimeout)
	defer cancel()
	if err := t.endWithin(ctx, ctx); err != nil {
		t.log.Warn("commit_on_shutdown_failed", "err", err)
	}
}

// end ends the open transaction before the broker's transaction timeout
// would abort it, and within ShutdownTimeout at least.
func (t *txnLoop) end(run context.Context) error {
	ctx, cancel := context.WithTimeout(context.Background(), t.endWithinFor())
	defer cancel()
	t.landEarlier(ctx)
	return t.endWithin(ctx, run)
}

// landEarlier waits until every record the workers produced so far in the
// open transaction is acknowledged, while they go on producing into it;
// settle, which holds them back, then waits only for what they produced
// meanwhile. Why: a transaction's first produce to a partition is the slow
// one, as the partition's leader first adds it to the transaction at the
// coordinator (KIP-890), a write of its own. On the 3-node cluster a
// transactional produce took 50 ms at the median against 8-14 ms without a
// transaction, and settle held every stage back for 64-154 ms at the
// median, 13-42 ms after; on one broker 1-16 ms, 0 after
// (docs/BENCHMARKS.md, "The end of a transaction").
func (t *txnLoop) landEarlier(ctx context.Context) {
	landed := make([]<-chan struct{}, 0, len(t.workers))
	for _, w := range t.workers {
		landed = append(landed, w.cl.newEra())
	}
	for _, ch := range landed {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return // settle gives up likewise, and says so
		}
	}
}

// txnTimeoutMargin is the time endWithinFor leaves before the transaction's
// timeout for the commit's own requests to the coordinators.
const txnTimeoutMargin = 2 * time.Second

// endWithinFor is how long the end of the open transaction may take before
// it gives up. Giving up aborts it and replays every stage's work since the
// last commit, which then waits for whatever held the first try: a leader
// moving after its node died, for one, waits for the broker to fence the
// node, 9 s or more. So the end waits as long as the transaction may stay
// open: from its first produce (the broker's clock starts no sooner) to its
// timeout, less a margin; and ShutdownTimeout at least, as it did before.
func (t *txnLoop) endWithinFor() time.Duration {
	t.mu.Lock()
	first := t.first
	t.mu.Unlock()
	left := first.Add(txnTimeout(t.cfg) - txnTimeoutMargin).Sub(t.cfg.NowFunc())
	return max(left, t.cfg.ShutdownTimeout)
}

// endWithin commits the open transaction with every stage's commit points, or
// aborts it and has every stage rewind, then begins the next one. A commit
// End did not hear confirmed (ctx ended, the coordinator died) is resolved
// from the group's offsets (txn_resolve.go), never taken for an abort.
//
// The poll loop stays out of PollFetches from before End reads the offsets
// polled until after Begin (poll_gate.go), and the workers produce nothing
// meanwhile (barrier).
func (t *txnLoop) endWithin(ctx, run context.Context) error {
	release := t.gate.hold()
	defer release()
	t.barrier.Lock()
	defer t.barrier.Unlock()
	t.mu.Lock()
	t.lastCommit = t.cfg.NowFunc()
	t.mu.Unlock()

	points, consistent := t.settle(ctx)
	// After settle: the dead letters it produced are in this transaction,
	// not the next. Nothing else produces until the barrier is released.
	t.mu.Lock()
	produced := t.produced
	t.produced, t.first = false, time.Time{}
	t.mu.Unlock()
	before := map[*worker]map[int32]txnPoint{}
	tried := false
	for w, pts := range points {
		w.mu.Lock()
		before[w] = w.groupAtMost(pts)
		w.mu.Unlock()
		tried = tried || len(pts) > 0
	}
	if !produced && !tried {
		// Nothing to end: the broker holds nothing of this transaction,
		// and it stays open for the next produce. Only the last, at a
		// stop, can be empty (run ends none before its first produce);
		// committing it sent no offsets, and franz-go then held the
		// session's lock for 500ms, the client's leave with it
		// (TestExactlyOnceStopsWithoutTheCommitPause).
		return nil
	}
	commits := make([]map[int32]int64, len(t.readers))
	for i, rd := range t.readers {
		commits[i] = rd.takeCommits()
	}
	rewrite := func(req *kmsg.TxnOffsetCommitRequest) error {
		ids := map[string][16]byte{}
		for _, rt := range req.Topics {
			ids[rt.Topic] = rt.TopicID
		}
		setTxnOffsets(req, points)
		for i, rd := range t.readers {
			addTxnOffsets(req, rd.topic, ids[rd.topic], commits[i])
		}
		return nil
	}
	// franz-go fails a transaction in which the group took partitions
	// away (GroupTransactSession's revoke and lost callbacks, which then
	// run ours): End aborts it without trying to commit. Taken after the
	// last End returned and before this one began, the abort is known and
	// not resolved from the group (txn_resolve.go), which waits for the
	// abort's markers: 0.1-0.6s at every rebalance of a rolling restart on
	// the 3-node cluster. One taken since counts for nothing here.
	revoked := t.taken.Load() != t.takenSeen
	committed, err := t.sess.End(kgo.PreTxnCommitFnContext(ctx, rewrite), kgo.TransactionEndTry(consistent))
	resolved := false
	if !committed && !fenced(err) {
		// End may have given up with the transaction still open (its
		// flush or EndTxn outlasted ctx: a broker restarting), or with a
		// commit whose answer never came: ending it here settles either
		// on the broker. It comes before the rewinds below, whose
		// offsets it would otherwise reset.
		if aerr := t.abortOpen(run); aerr != nil {
			return aerr
		}
		if consistent && tried && !revoked && run.Err() == nil {
			committed = t.committedAfterAll(run, points, before)
			resolved = committed
		}
	}
	// End resets franz-go's failure as it returns: what was taken until
	// now tells nothing of the next End, which may still fail by a take
	// that came after the reset and so resolves its outcome needlessly,
	// never wrongly.
	t.takenSeen = t.taken.Load()
	if !committed {
		t.log.Info("transaction_aborted", "tried_commit", consistent, "revoked", revoked, "err", err)
	}
	rewound := map[string]map[int32]kgo.EpochOffset{}
	for _, w := range t.workers {
		if offsets := w.txnEnded(points[w], committed, resolved, err); len(offsets) > 0 {
			rewound[w.source] = offsets
		}
	}
	if len(rewound) > 0 {
		// One call for every stage: each stops the client's fetch session.
		t.sess.Client().SetOffsets(rewound)
	}
	for _, rd := range t.readers {
		rd.ended(committed)
	}
	if err != nil && fenced(err) {
		return t.fencedTxn(run, err)
	}
	return t.begin(run)
}

// settle waits until every record produced in the transaction is
// acknowledged and its outcome applied (a refused record becomes a dead
// letter, produced in turn), and returns each worker's partitions whose
// commit point or skips moved. consistent is false when ctx ended first, or
// a partition's skips do not fit in a commit's metadata.
func (t *txnLoop) settle(ctx context.Context) (points map[*worker]map[int32]txnPoint, consistent bool) {
	for {
		more := false
		for _, w := range t.workers {
			if err := w.cl.flush(ctx); err != nil {
				w.log.Warn("flush_on_commit_failed", "err", err)
			}
			more = w.applyTxnAcks() || more
		}
		if more && ctx.Err() == nil {
			continue
		}
		points = make(map[*worker]map[int32]txnPoint, len(t.workers))
		consistent = ctx.Err() == nil
		for _, w := range t.workers {
			pts, ok := w.txnPoints()
			points[w] = pts
			consistent = consistent && ok
		}
		return points, consistent
	}
}

// begin begins the next transaction. Not when stopping: abortOpen gave up on
// a transaction the broker aborts at its timeout, and the loop ends.
func (t *txnLoop) begin(run context.Context) error {
	err := t.sess.Begin()
	switch {
	case err == nil || run.Err() != nil:
		return nil
	case fenced(err):
		return t.fencedTxn(run, err)
	case errors.Is(err, kerr.ConcurrentTransactions):
		// The last End's EndTxn (or AddOffsetsToTxn) was answered
		// CONCURRENT_TRANSACTIONS until its context ran out, as while a
		// coordinator that just took over writes the markers of the
		// transaction before. franz-go then fails the producer id for
		// good, because kerr counts the error not retriable (txn.go
		// EndTransaction), though it passes by itself; every Begin after
		// is refused. A new session starts where this one cannot
		// (txn_renew.go; TestConcurrentTransactionsRenews).
		return fmt.Errorf("%w: begin transaction: %w", errRenew, err)
	}
	return fmt.Errorf("begin transaction: %w", err)
}

// abortOpen aborts the open transaction, trying again with a backoff until
// the broker takes it or run ends. Nothing can be delivered meanwhile: the
// records the transaction holds are read again after it.
func (t *txnLoop) abortOpen(run context.Context) error {
	for backoff := retryBackoffMin; ; backoff = min(2*backoff, resolveBackoffMax) {
		ctx, cancel := context.WithTimeout(run, t.cfg.ShutdownTimeout)
		_, err := t.sess.End(ctx, kgo.TryAbort)
		cancel()
		switch {
		case err == nil:
			return nil
		case fenced(err):
			return t.fencedTxn(run, err)
		case run.Err() != nil:
			return nil // stopping: the broker aborts it at the transaction timeout
		}
		t.log.Warn("transaction_abort_failed", "retry_in", backoff, "err", err)
		select {
		case <-run.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}
