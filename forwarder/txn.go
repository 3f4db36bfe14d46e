package forwarder

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once delivery (Config.Delivery ExactlyOnce).
//
// A worker produces into one open transaction at a time, and ends it
// CommitLinger after its first produce (txnEnd): it waits for every produce
// to be acknowledged, commits its partitions' commit points inside the
// transaction (TxnOffsetCommit, fenced by the group generation as KIP-447
// says), and commits the transaction; the next one begins at once. A read_committed
// consumer thus sees a record and the offset it came from committed
// together, or neither: a crash or an abort replays exactly what it never saw.
//
// Two things differ from franz-go's GroupTransactSession used as is:
//
//   - The offsets committed. End would commit every polled offset
//     (UncommittedOffsets), but a worker polls records long before they are
//     due: committing them would lose them on a crash. kdelay rewrites the
//     request (PreTxnCommitFnContext) to commit its own commit points.
//   - What an abort rewinds. End rewinds the client to the offsets it
//     believes committed, which are the polled ones. kdelay forgets
//     everything it took since its last commit and rewinds each partition to
//     its own last committed offset (rewind).
//
// The replay after a crash starts at the commit point, and must not produce
// again what a committed transaction holds of the records above it: the
// commit lists those in its metadata (txn_skips.go). A record waiting to be
// retried keeps its retry state across a rewind, so that DeliveryTimeout
// still bounds it.

// txnOpts are the options of a worker's client in exactly-once delivery.
func txnOpts(cfg *Config, group string) []kgo.Opt {
	return []kgo.Opt{
		kgo.TransactionalID(TransactionalID(cfg.InstanceID, group, cfg.TransactionalIDSuffix)),
		// An open transaction holds back every read_committed consumer of
		// the partitions it wrote to: a process that dies for good must not
		// hold them long. One that restarts aborts it at once (see
		// Config.InstanceID).
		kgo.TransactionTimeout(txnTimeout(cfg)),
	}
}

// TransactionalID is the transactional id of the producer of a consumer
// group's member in exactly-once delivery: the process's instance id, ".",
// the group, and suffix (Config.TransactionalIDSuffix). The scheduler names
// its own the same way, and kdelay bench finds its coordinator with it.
func TransactionalID(instanceID, group, suffix string) string {
	return instanceID + "." + group + suffix
}

// txnTimeout lets a transaction run for its CommitInterval, plus the
// produces the commit waits for (bounded by DeliveryTimeout's retries), with
// room to spare.
func txnTimeout(cfg *Config) time.Duration {
	return max(10*cfg.CommitInterval, 15*time.Second)
}

// txnState is a worker's bookkeeping of its open transaction. Only the
// worker's loop touches it.
type txnState struct {
	produced bool                    // something was produced in the open transaction
	first    time.Time               // when the first of it was (txnEnd)
	produces int                     // produces so far, to see whether applying acks produced more
	retries  map[retryKey]retryState // failed records' retry state, kept across an abort
	moves    []moveMark              // records moved ahead in the open transaction: undone by an abort
}

// retryState is what a failed produce leaves for the replay of its record
// after the transaction is aborted.
type retryState struct {
	first    time.Time
	attempts int
	lastErr  error
}

type retryKey struct {
	partition int32
	offset    int64
}

// endTxnIfDue ends the open transaction at txnEnd, if anything was produced
// in it. The loop calls it without mu: End waits for the session's
// rebalance lock, which a revoke holds while it calls revoked, which takes
// mu.
func (w *worker) endTxnIfDue(run context.Context, now time.Time) error {
	if !w.tx.produced || now.Before(w.txnEnd()) {
		return nil
	}
	w.lastCommit = now
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
	defer cancel()
	return w.endTxn(ctx, run)
}

// noteProduced marks the open transaction as holding a produce, the first
// one starting its linger. Only the loop calls it.
func (w *worker) noteProduced() {
	if !w.tx.produced {
		w.tx.produced, w.tx.first = true, w.cfg.NowFunc()
	}
}

// txnEnd is when the open transaction, which holds a produce, ends:
// CommitLinger after its first produce, or CommitInterval after the last
// end if that is sooner. Ending it at every CommitInterval alone, as until
// 2026-11-28, showed each record up to a second late to a read_committed
// consumer, and held back the records of others written after it.
func (w *worker) txnEnd() time.Time {
	return earliest(w.lastCommit.Add(w.cfg.CommitInterval), w.tx.first.Add(w.cfg.CommitLinger))
}

// endTxn commits the open transaction with the partitions' commit points, or
// aborts it and rewinds, then begins the next one. A commit End did not hear
// confirmed (ctx ended, the coordinator died) is resolved from the group's
// offsets (txn_resolve.go), never taken for an abort.
//
// The client's poll loop stays out of PollFetches from before End reads the
// offsets polled until after Begin (poll_gate.go): franz-go forbids a poll
// beside either. mu is not held while the gate is closed, since the loop may
// wait for it in take.
func (w *worker) endTxn(ctx, run context.Context) error {
	release := w.cl.holdPolls()
	defer release()
	points, consistent := w.settle(ctx)
	rewrite := func(req *kmsg.TxnOffsetCommitRequest) error {
		setTxnOffsets(req, w.source, points)
		return nil
	}
	w.mu.Lock()
	before := w.groupAtMost(points)
	w.mu.Unlock()
	committed, err := w.txn.End(kgo.PreTxnCommitFnContext(ctx, rewrite), kgo.TransactionEndTry(consistent))
	resolved := false
	if !committed && !fenced(err) {
		// End may have given up with the transaction still open (its
		// flush or EndTxn outlasted ctx: a broker restarting), or with a
		// commit whose answer never came: ending it here settles either
		// on the broker. It comes before the rewind below, whose offsets
		// it would otherwise reset.
		if aerr := w.abortOpen(run); aerr != nil {
			return aerr
		}
		if consistent && len(points) > 0 && run.Err() == nil {
			committed = w.committedAfterAll(run, points, before)
			resolved = committed
		}
	}

	w.mu.Lock()
	w.tx.produced, w.tx.first = false, time.Time{}
	if committed {
		for id, o := range points {
			if p, ok := w.parts[id]; ok {
				p.committed, p.meta, p.metaAt = max(p.committed, o.Offset), o.meta, o.Offset
			}
		}
		clear(w.tx.retries)
		w.tx.moves = nil
		w.progress(w.cfg.NowFunc())
		w.log.Debug("transaction_committed", "offsets", points)
	} else {
		w.stats.Aborted++
		w.noteFailure(StuckTransaction, err)
		w.log.Info("transaction_aborted", "tried_commit", consistent, "err", err)
	}
	if !committed || resolved {
		// The client read on from where it believed itself committed:
		// read each partition again from its commit point.
		w.rewind()
	}
	w.mu.Unlock()
	if err != nil && fenced(err) {
		return w.fencedTxn(run, err)
	}
	return w.begin(run)
}

// begin begins the next transaction. Not when stopping: abortOpen gave up on
// a transaction the broker aborts at its timeout, and the loop ends.
func (w *worker) begin(run context.Context) error {
	err := w.txn.Begin()
	switch {
	case err == nil || run.Err() != nil:
		return nil
	case fenced(err):
		return w.fencedTxn(run, err)
	case errors.Is(err, kerr.ConcurrentTransactions):
		// The last End's EndTxn (or AddOffsetsToTxn) was answered
		// CONCURRENT_TRANSACTIONS until its context ran out, as while a
		// coordinator that just took over writes the markers of the
		// transaction before. franz-go then fails the producer id for
		// good, because kerr counts the error not retriable (txn.go
		// EndTransaction), though it passes by itself; every Begin after
		// is refused. A new session starts where this one cannot
		// (renew.go; TestConcurrentTransactionsRenews).
		return fmt.Errorf("%w: begin transaction: %w", errRenew, err)
	}
	return fmt.Errorf("begin transaction: %w", err)
}

// abortOpen aborts the open transaction, trying again with a backoff until
// the broker takes it or run ends. Nothing can be delivered meanwhile: the
// records the transaction holds are read again after it.
func (w *worker) abortOpen(run context.Context) error {
	for backoff := retryBackoffMin; ; backoff = min(2*backoff, retryBackoffMax) {
		ctx, cancel := context.WithTimeout(run, w.cfg.ShutdownTimeout)
		_, err := w.txn.End(ctx, kgo.TryAbort)
		cancel()
		switch {
		case err == nil:
			return nil
		case fenced(err):
			return w.fencedTxn(run, err)
		case run.Err() != nil:
			return nil // stopping: the broker aborts it at the transaction timeout
		}
		w.log.Warn("transaction_abort_failed", "retry_in", backoff, "err", err)
		select {
		case <-run.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// settle waits until every record produced in the transaction is
// acknowledged and its outcome applied (a refused record becomes a dead
// letter, produced in turn), and returns what to commit for the partitions
// whose commit point or skips moved. consistent is false when ctx ended
// first, or a partition's skips do not fit in a commit's metadata.
func (w *worker) settle(ctx context.Context) (points map[int32]txnPoint, consistent bool) {
	for {
		if err := w.cl.flush(ctx); err != nil {
			w.log.Warn("flush_on_commit_failed", "err", err)
		}
		w.mu.Lock()
		before := w.tx.produces
		w.applyAcks(w.cfg.NowFunc())
		if w.tx.produces != before && ctx.Err() == nil {
			w.mu.Unlock()
			continue
		}
		points = map[int32]txnPoint{}
		consistent = ctx.Err() == nil
		for id, p := range w.parts {
			pt := p.txnPoint()
			if pt.Offset > p.committed || pt.meta != p.meta {
				points[id] = pt
			}
			if len(pt.meta) > maxSkipsMeta {
				consistent = false
			}
		}
		w.mu.Unlock()
		return points, consistent
	}
}

// setTxnOffsets makes req commit points for topic, and nothing else.
func setTxnOffsets(req *kmsg.TxnOffsetCommitRequest, topic string, points map[int32]txnPoint) {
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for _, t := range req.Topics {
		if t.Topic == topic {
			rt.TopicID = t.TopicID
		}
	}
	for id, o := range points {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition = id
		rp.Offset = o.Offset
		rp.LeaderEpoch = o.Epoch
		rp.Metadata = &o.meta
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = req.Topics[:0]
	if len(rt.Partitions) > 0 {
		req.Topics = append(req.Topics, rt)
	}
}

// rewind forgets every partition after an aborted transaction and reads each
// again from its last committed offset: what was taken since is replayed,
// and what the aborted transaction produced is invisible to read_committed
// consumers. A record's retry state is kept in retries. mu must be held.
func (w *worker) rewind() {
	for e := range w.held.all() {
		if e.attempts > 0 && !e.part.gone {
			w.tx.retries[retryKey{e.part.id, e.src.Offset}] = retryState{e.first, e.attempts, e.lastErr}
		}
	}
	offsets := map[int32]kgo.EpochOffset{}
	from := map[int32]inherited{}
	ids := make([]int32, 0, len(w.parts))
	for id, p := range w.parts {
		offsets[id] = p.restart()
		if p.meta != "" {
			from[id] = inherited{p.metaAt, p.meta}
		}
		ids = append(ids, id)
	}
	w.forget(ids)
	// Read again from its last commit, a partition skips what that
	// commit's metadata lists, as a new owner would.
	w.handedOn.Lock()
	if w.inherit == nil {
		w.inherit = map[int32]inherited{}
	}
	maps.Copy(w.inherit, from)
	w.handedOn.Unlock()
	w.held, w.heldRetry = nil, 0
	// Copies moved ahead in the aborted transaction were never made: their
	// originals must not be dropped, and the scan must run again.
	for _, m := range w.tx.moves {
		w.cmds.unmove(m.id, m.cmd, m.source)
	}
	w.tx.moves = nil
	w.scans.from = 0
	w.cl.setOffsets(offsets)
}

// recall gives a record taken again after a rewind the retry state it had.
// mu must be held.
func (w *worker) recall(e *entry) {
	if s, ok := w.tx.retries[retryKey{e.part.id, e.src.Offset}]; ok {
		e.first, e.attempts, e.lastErr = s.first, s.attempts, s.lastErr
	}
}

// fenced reports whether err says another producer took this transactional
// id: the worker cannot go on.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}
