package schedule

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay/forwarder"
)

// connect makes the client that reads the schedules topic in the group and
// writes occurrences, cancels and progress.
func (s *Scheduler) connect() error {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.ClientID("kdelay-schedules"),
		kgo.ConsumeTopics(s.cfg.Topics.Schedules()),
		kgo.ConsumerGroup(s.cfg.group()),
		// As the forwarder's groups (forwarder/membership.go): a process
		// that restarts with its instance id takes its partitions back at
		// once, and a rebalance moves only the partitions that change owner.
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.InstanceID(s.cfg.InstanceID),
		kgo.SessionTimeout(s.cfg.SessionTimeout),
		kgo.HeartbeatInterval(min(s.cfg.SessionTimeout/10, 3*time.Second)),
		// Through a coordinator's failover, as the forwarder's groups.
		forwarder.GroupRetryTimeout(s.cfg.SessionTimeout),
		// Nothing is resumed from a committed offset: a partition is read
		// from its start each time it is assigned (fromStart).
		kgo.DisableAutoCommit(),
		kgo.AdjustFetchOffsetsFn(fromStart),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A partition changes owner only while the loop polls, never
		// while it writes what it decided from the state of that partition.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onRevoked),
		// Progress written in an aborted transaction never happened; the
		// markers are offsets too, which loading must reach.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.RecordPartitioner(newPartitioner(s.cfg.Topics.Schedules())),
		// An occurrence is written Lookahead before its time: lingering
		// only delays the step.
		kgo.ProducerLinger(0),
		kgo.DisableClientMetrics(),
		// Loading must not buffer franz-go's default 50 MiB a fetch,
		// nor even 1 MiB (fetchBytes).
		kgo.FetchMaxBytes(fetchBytes),
		kgo.FetchMaxPartitionBytes(fetchBytes),
	}, append(
		// Its occurrences reach a partition that moved as soon as the
		// forwarder's records do.
		forwarder.FailoverOpts(), s.cfg.ClientOpts...)...)
	if !s.cfg.ExactlyOnce {
		cl, err := kgo.NewClient(opts...)
		s.cl, s.out = cl, cl
		return err
	}
	txn, err := kgo.NewGroupTransactSession(append(opts,
		kgo.TransactionalID(forwarder.TransactionalID(s.cfg.InstanceID, s.cfg.group(), s.cfg.TransactionalIDSuffix)),
		// A transaction is one step, milliseconds; an open one holds back
		// every read_committed reader of the ingress partitions it wrote
		// to, the forwarder among them, so a process that died must not
		// hold them long.
		kgo.TransactionTimeout(txnTimeout),
	)...)
	if err != nil {
		return err
	}
	s.txn, s.cl = txn, txn.Client()
	return nil
}

const txnTimeout = 15 * time.Second

// step writes what is due now: at most Batch occurrences, with the cancels
// and progress that go with them, and compacts (compact.go).
func (s *Scheduler) step(ctx context.Context) error {
	if err := s.loadEnds(ctx); err != nil {
		return err
	}
	now := s.cfg.NowFunc()
	s.mu.Lock()
	plans := s.st.plan(now, s.cfg.Batch)
	s.mu.Unlock()
	plans = s.readBack(ctx, plans)
	s.stepMu.Lock()
	locked := true
	unlock := func() {
		if locked {
			locked = false
			s.stepMu.Unlock()
		}
	}
	defer unlock()
	s.mu.Lock()
	b := s.st.due(now, s.cfg.Batch, plans)
	ends := map[int32]int64{}
	for p := range b.parts {
		ends[p] = s.st.parts[p].next
	}
	s.mu.Unlock()
	if len(b.records)+len(b.progress) == 0 {
		s.trim(ctx, b.cuts) // a partition with no schedule left
		return nil
	}
	var written bool
	var err error
	switch {
	case s.cfg.AsReader && s.cfg.ExactlyOnce:
		written = s.writeShared(ctx, b, ends, unlock)
	case s.txn != nil:
		written, err = s.writeTxn(ctx, b, ends)
	default:
		written = s.write(ctx, b, unlock)
	}
	if err != nil || ctx.Err() != nil {
		return err
	}
	if written {
		s.mu.Lock()
		s.st.moved(b)
		s.occurrences += int64(b.occurrences)
		s.late += int64(b.late)
		s.mu.Unlock()
		s.trim(ctx, b.cuts)
		s.cfg.Logger.Info("occurrences_written", "occurrences", b.occurrences, "late", b.late, "cancels", b.cancels,
			"schedules", len(b.progress)-b.snapshots, "snapshots", b.snapshots)
	}
	return nil
}

// readBack reads back what plans name, and returns those read. A
// partition it fails to read is loaded again: the records the slots name
// were there when it was loaded, so it changed under this process.
func (s *Scheduler) readBack(ctx context.Context, plans []*plan) []*plan {
	read := plans[:0]
	for _, pl := range plans {
		err := readBack(ctx, s.reader, pl)
		if err == nil {
			read = append(read, pl)
			continue
		}
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("schedules_read_back_failed", "partition", pl.p.id, "err", err)
		}
		s.mu.Lock()
		same := s.st.parts[pl.p.id] == pl.p
		s.mu.Unlock()
		if same {
			s.reload([]int32{pl.p.id})
		}
	}
	return read
}

// write writes b at least once: the progress only once the broker has
// acknowledged the occurrences and cancels it counts, so that a crash
// between the two writes them again, with the same ids, rather than skip
// them. A failure loads the partitions again: what they hold is the truth.
// It reports whether all of b was written.
//
// unlock ends the step's hold of stepMu before a reload: AsReader, the
// reload waits for the forwarders' poll, which may wait in a revoke for
// the step.
func (s *Scheduler) write(ctx context.Context, b batch, unlock func()) bool {
	for i, rs := range [][]*kgo.Record{b.records, b.progress} {
		if i == 1 && s.cfg.beforeProgress != nil {
			s.cfg.beforeProgress()
		}
		if err := s.out.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("schedules_write_failed", "partitions", slices.Sorted(maps.Keys(b.parts)), "err", err)
			}
			unlock()
			s.reload(slices.Collect(maps.Keys(b.parts)))
			return false
		}
	}
	return true
}

// writeTxn writes b in one transaction, with an offset commit for each
// partition whose progress it writes: the commit carries the group's
// generation, so that the broker refuses the transaction of a process that
// lost the partition (KIP-447), and a process taking the partition over
// waits for an open one to end before it reads. A transaction that did
// not commit wrote nothing a read_committed reader sees: the partitions
// are loaded again. It reports whether the transaction committed.
func (s *Scheduler) writeTxn(ctx context.Context, b batch, ends map[int32]int64) (bool, error) {
	for _, r := range b.records {
		s.cl.Produce(ctx, r, nil) // End flushes, and aborts if one failed
	}
	if s.cfg.beforeProgress != nil {
		_ = s.cl.Flush(ctx)
		s.cfg.beforeProgress()
	}
	for _, r := range b.progress {
		s.cl.Produce(ctx, r, nil)
	}
	commit := kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		setOffsets(req, s.cfg.Topics.Schedules(), ends)
		return nil
	})
	committed, err := s.txn.End(commit, kgo.TryCommit)
	if !committed {
		if ferr := s.fenced(err); ferr != nil {
			return false, ferr
		}
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("schedules_transaction_aborted", "err", err)
		}
		// End may have given up with the transaction open, or with a
		// commit it never heard confirmed: ending it settles the outcome
		// on the broker, and the reload then reads whichever it was (it
		// reads committed records only). The reload comes after: ending
		// resets the client's offsets.
		if err := s.abortOpen(ctx); err != nil {
			return false, err
		}
		s.reload(s.ownedNow())
	}
	return committed, s.begin(ctx)
}

// begin begins the next transaction, unless stopping.
func (s *Scheduler) begin(ctx context.Context) error {
	err := s.txn.Begin()
	if err == nil || ctx.Err() != nil {
		return nil
	}
	if ferr := s.fenced(err); ferr != nil {
		return ferr
	}
	return fmt.Errorf("begin transaction: %w", err)
}

// abortOpen ends whatever transaction the client still holds, trying again
// with a backoff until the broker answers or ctx ends (stopping: the broker
// aborts it at the transaction timeout).
func (s *Scheduler) abortOpen(ctx context.Context) error {
	for backoff := time.Second; ; backoff = min(2*backoff, 30*time.Second) {
		abort, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		_, err := s.txn.End(abort, kgo.TryAbort)
		cancel()
		if err == nil || ctx.Err() != nil {
			return nil
		}
		if ferr := s.fenced(err); ferr != nil {
			return ferr
		}
		s.cfg.Logger.Warn("schedules_transaction_abort_failed", "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// fenced is nil unless err says the broker fenced the producer. Then it is
// errRenew if no other process holds the instance id (the coordinator
// fenced a transaction it aborted past its timeout, as after a cluster lost
// its quorum), and the error that says to give each process its own
// instance id if one does (the forwarder does the same: forwarder/txn_renew.go).
func (s *Scheduler) fenced(err error) error {
	if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		// Not a fence at all: renewing would be refused the same way.
		return fmt.Errorf("transactional id %s.%s: %w; allow this principal WRITE and DESCRIBE on transactional ids starting with %q",
			s.cfg.InstanceID, s.cfg.group(), err, s.cfg.InstanceID)
	}
	if !errors.Is(err, kerr.ProducerFenced) {
		return nil
	}
	if !s.otherHoldsInstance() {
		return fmt.Errorf("%w: %w", errRenew, err)
	}
	return fmt.Errorf("transactional id %s.%s: %w; another kdelay process uses it: %w", s.cfg.InstanceID, s.cfg.group(), err, forwarder.ErrInstanceIDTaken)
}

// errRenew stops the loop of a Scheduler whose producer was fenced while no
// other process holds its instance id: Run connects again.
var errRenew = errors.New("transactional producer fenced while no other process holds the instance id")

// otherHoldsInstance reports whether a member of the group other than this
// client holds the instance id, as the forwarder asks it.
func (s *Scheduler) otherHoldsInstance() bool {
	other, err := forwarder.InstanceHeldElsewhere(context.Background(), s.cl, s.cfg.group(), s.cfg.InstanceID, s.cfg.ShutdownTimeout)
	if err != nil {
		s.cfg.Logger.Warn("schedules_instance_id_holder_unknown", "err", err)
	}
	return other
}

// setOffsets makes req commit offset ends[p] for each partition p of
// topic, and nothing else.
func setOffsets(req *kmsg.TxnOffsetCommitRequest, topic string, ends map[int32]int64) {
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range ends {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o, -1, &req.MemberID
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics[:0], rt)
}

// reload forgets partitions and reads them again from their start. mu must
// not be held: AsReader, the forwarders' poll must hand on what it fetched
// first, and its Take takes mu.
func (s *Scheduler) reload(ids []int32) {
	if len(ids) == 0 {
		return
	}
	offsets := map[int32]int64{}
	for _, id := range ids {
		offsets[id] = 0
	}
	reset := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		// AsReader, a revoke may have come since ids were picked: a
		// partition no longer owned is not loaded again.
		owned := slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { _, ok := s.st.parts[id]; return !ok })
		s.st.assign(owned)
		s.noteIndex()
	}
	if s.cfg.AsReader {
		s.mu.Lock()
		rc := s.rc
		s.mu.Unlock()
		if rc == nil {
			reset() // no client yet: nothing was read
			return
		}
		rc.Reread(offsets, reset)
		return
	}
	// The loop's own client, polled by the loop alone: the offsets hold
	// from its next poll.
	reset()
	at := map[int32]kgo.EpochOffset{}
	for id, o := range offsets {
		at[id] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	s.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{s.cfg.Topics.Schedules(): at})
}
