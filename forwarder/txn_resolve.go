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

// committedAfterAll reports whether the transaction that tried to commit
// offsets committed after all. The client must have ended the transaction
// (abortOpen): ending it settles a pending outcome on the broker. prev are
// the partitions' commit points before it. A partition another member
// committed for since, or a group that cannot be read before run ends,
// decides nothing; with no partition to decide, the transaction counts as
// aborted and is replayed, as before.
func (w *worker) committedAfterAll(run context.Context, offsets map[int32]kgo.EpochOffset, prev map[int32]int64) bool {
	adm := kadm.NewClient(w.cl)
	for backoff := retryBackoffMin; ; backoff = min(2*backoff, retryBackoffMax) {
		ctx, cancel := context.WithTimeout(run, w.cfg.ShutdownTimeout)
		got, err := adm.FetchOffsets(kadm.RequireStable(ctx), w.group)
		cancel()
		if err == nil {
			err = unstable(got, w.source)
		}
		if err == nil {
			committed, decided := outcome(got, w.source, offsets, prev)
			w.log.Info("transaction_outcome_resolved", "committed", committed, "decided_by", decided)
			return committed
		}
		if run.Err() != nil {
			return false
		}
		w.log.Warn("transaction_outcome_unknown", "retry_in", backoff, "err", err)
		select {
		case <-run.Done():
			return false
		case <-time.After(backoff):
		}
	}
}

// unstable is the error of a partition whose offset is still pending in a
// transaction, which the fetch has to wait out.
func unstable(got kadm.OffsetResponses, topic string) error {
	var err error
	got.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && errors.Is(o.Err, kerr.UnstableOffsetCommit) {
			err = o.Err
		}
	})
	return err
}

// outcome reads the transaction's outcome from the group's offsets: it
// committed if a partition is at the offset it tried, aborted if one is
// still at its commit point before. decided is how many partitions told.
func outcome(got kadm.OffsetResponses, topic string, tried map[int32]kgo.EpochOffset, prev map[int32]int64) (committed bool, decided int) {
	for id, o := range tried {
		at := int64(-1)
		if r, ok := got.Lookup(topic, id); ok && r.Err == nil {
			at = r.At
		}
		switch at {
		case o.Offset:
			return true, decided + 1
		case prev[id]:
			decided++
		}
	}
	return false, decided
}
