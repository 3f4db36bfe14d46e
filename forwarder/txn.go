package forwarder

import (
	"errors"
	"maps"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once delivery (Config.Delivery ExactlyOnce).
//
// Every worker of a process produces into one open transaction, which
// txnLoop ends CommitLinger after its first produce (txn_loop.go): it waits
// for every produce to be acknowledged, commits every partition's commit
// point inside the transaction (TxnOffsetCommit, fenced by the group
// generation as KIP-447 says), and commits the transaction; the next one
// begins at once. A read_committed consumer thus sees a record and the
// offset it came from committed together, or neither: a crash or an abort
// replays exactly what it never saw.
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

// txnOpts are the options of the forwarders' client in exactly-once
// delivery.
func txnOpts(cfg *Config) []kgo.Opt {
	return []kgo.Opt{
		kgo.TransactionalID(TransactionalID(cfg.InstanceID, cfg.Group, cfg.TransactionalIDSuffix)),
		// An open transaction holds back every read_committed consumer of
		// the partitions it wrote to: a process that dies for good must not
		// hold them long. One that restarts aborts it at once (see
		// Config.InstanceID).
		kgo.TransactionTimeout(txnTimeout(cfg)),
		// A record that fails dooms its transaction: every stage's work
		// since the last commit is aborted and replayed. A failover's
		// retriable errors (a leader moving, too few in-sync replicas)
		// last as long as the broker takes to fence the dead node, 9 s or
		// more, where clientRetries give up within seconds: the client
		// tries until the transaction's end gives up on it (txnLoop.end).
		kgo.RecordRetries(math.MaxInt),
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

// txnState is a worker's bookkeeping of the open transaction, under its mu.
type txnState struct {
	produced bool                    // the worker produced in the open transaction
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

// noteProduced marks the open transaction as holding a produce of this
// worker. mu must be held.
func (w *worker) noteProduced() {
	if w.txn != nil {
		w.tx.produced = true
		w.txn.noteProduced(w.cfg.NowFunc())
	}
}

// producing keeps the transaction from ending while the caller may produce
// (txnLoop.barrier); release lets it end. A no-op at-least-once. Taken
// before mu.
func (w *worker) producing() (release func()) {
	if w.txn == nil {
		return func() {}
	}
	w.txn.barrier.RLock()
	return w.txn.barrier.RUnlock
}

// applyTxnAcks applies the outcome of what the worker produced, and reports
// whether that produced more (a refused record becomes a dead letter).
func (w *worker) applyTxnAcks() (more bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := w.tx.produces
	w.applyAcks(w.cfg.NowFunc())
	return w.tx.produces != before
}

// txnPoints is what the transaction commits for the worker's partitions:
// those whose commit point or skips moved. ok is false when a partition's
// skips do not fit in a commit's metadata, or are more than a reader takes.
func (w *worker) txnPoints() (points map[int32]txnPoint, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	points, ok = map[int32]txnPoint{}, true
	for id, p := range w.parts {
		pt := p.txnPoint()
		if pt.Offset > p.committed || pt.meta != p.meta {
			points[id] = pt
		}
		if len(pt.meta) > maxSkipsMeta || pt.skips > maxSkips {
			ok = false
		}
	}
	return points, ok
}

// txnEnded takes the outcome of the transaction that tried to commit points:
// the partitions move on to them, or every partition is read again from its
// commit point (rewind), which it returns for the client to read from.
// resolved says the commit was found in the group after End did not hear it
// (txn_resolve.go): the client read on from where it believed itself
// committed, so the worker rewinds then too.
func (w *worker) txnEnded(points map[int32]txnPoint, committed, resolved bool, err error) (rewound map[int32]kgo.EpochOffset) {
	w.mu.Lock()
	defer w.mu.Unlock()
	produced := w.tx.produced
	w.tx.produced = false
	if committed {
		for id, o := range points {
			if p, ok := w.parts[id]; ok {
				p.committed, p.meta, p.metaAt = max(p.committed, o.Offset), o.meta, o.Offset
			}
		}
		clear(w.tx.retries)
		w.tx.moves = nil
		if produced || len(points) > 0 {
			w.progress(w.cfg.NowFunc())
		}
		if len(points) > 0 {
			w.log.Debug("transaction_committed", "offsets", points)
		}
	} else if produced {
		w.stats.Aborted++
		w.noteFailure(StuckTransaction, err)
	}
	if !committed || resolved {
		rewound = w.rewind()
	}
	// A partition holding a record may take more now (roomInWindow).
	w.nudge()
	return rewound
}

// setTxnOffsets makes req commit each worker's points for its source, and
// nothing else.
func setTxnOffsets(req *kmsg.TxnOffsetCommitRequest, points map[*worker]map[int32]txnPoint) {
	ids := map[string][16]byte{}
	for _, t := range req.Topics {
		ids[t.Topic] = t.TopicID
	}
	req.Topics = req.Topics[:0]
	for w, pts := range points {
		if len(pts) == 0 {
			continue
		}
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = w.source, ids[w.source]
		for id, o := range pts {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition = id
			rp.Offset = o.Offset
			rp.LeaderEpoch = o.Epoch
			rp.Metadata = &o.meta
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
}

// rewind forgets every partition after an aborted transaction, and returns
// the offset each is to be read again from, its last commit: what was taken
// since is replayed, and what the aborted transaction produced is invisible
// to read_committed consumers. A record's retry state is kept in retries.
// mu must be held.
func (w *worker) rewind() map[int32]kgo.EpochOffset {
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
	w.handoff.mu.Lock()
	if w.handoff.inherit == nil {
		w.handoff.inherit = map[int32]inherited{}
	}
	maps.Copy(w.handoff.inherit, from)
	w.handoff.mu.Unlock()
	w.held, w.heldRetry = nil, 0
	// Copies moved ahead in the aborted transaction were never made: their
	// originals must not be dropped, and the scan must run again.
	for _, m := range w.tx.moves {
		w.cmds.unmove(m.id, m.cmd, m.source)
	}
	w.tx.moves = nil
	w.scans.from = 0
	return offsets
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
