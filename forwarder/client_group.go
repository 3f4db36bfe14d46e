package forwarder

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// stageCallbacks are the group options of a client that serves the workers
// of stages, keyed by source topic, and readers (client_reader.go), keyed by
// theirs. franz-go calls each callback with the
// partitions of every topic the client consumes; each worker gets those of
// its own source, and an empty list when it has none: a cooperative revoke
// that takes nothing from a worker still has it commit, as its own client's
// callback always did.
//
// The workers' parts of one callback run concurrently, so that the slowest
// bounds a rebalance rather than their sum: a revoke waits for the produces
// that hand its held records back (rebalance_handback.go), and a lost session commits
// for up to groupRetry.
//
// taken counts the callbacks that took partitions away: a revoke of some,
// or a lost session (txnLoop.endWithin reads it).
func stageCallbacks(workers map[string]*worker, readers map[string]Reader, taken *atomic.Uint64, wait *fetchWait, beats *quickBeats) []kgo.Opt {
	return []kgo.Opt{
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, got map[string][]int32) {
			wait.assigned() // before the partitions' first fetch
			// A cooperative rebalance's second round starts when a member
			// that gave partitions up in the first rejoins.
			beats.quicken()
			eachStage(workers, readers, got, func(w *worker, ids []int32) { w.onAssigned(ids) }, Reader.Assigned)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
			beats.quicken() // a session's end: the group is rebalancing
			eachStage(workers, readers, revoked, func(w *worker, ids []int32) { w.onRevoked(ctx, ids) },
				func(r Reader, ids []int32) { r.Revoked(ctx, ids) })
			// A cooperative rebalance calls it with none at every end of a
			// session, which fails no transaction.
			if slices.ContainsFunc(slices.Collect(maps.Values(revoked)), func(ids []int32) bool { return len(ids) > 0 }) {
				taken.Add(1)
			}
		}),
		kgo.OnPartitionsLost(func(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
			eachStage(workers, readers, lost, func(w *worker, ids []int32) { w.onLost(ctx, ids) },
				func(r Reader, ids []int32) { r.Lost(ctx, ids) })
			taken.Add(1)
		}),
		kgo.AdjustFetchOffsetsFn(func(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			// The partitions join the fetches once their offsets are in,
			// which can be long after the assignment (RequireStable waits
			// out the last owner's transaction).
			defer wait.assigned()
			for topic, w := range workers {
				w.adjustOffsets(ctx, offsets[topic])
			}
			for topic, r := range readers {
				if ps := offsets[topic]; len(ps) > 0 {
					r.Offsets(ctx, ps)
				}
			}
			return offsets, nil
		}),
	}
}

// eachStage calls fn for every worker with its source's partitions of
// parts, and rfn for every reader with its topic's, concurrently, and
// returns once every call has.
func eachStage(workers map[string]*worker, readers map[string]Reader, parts map[string][]int32,
	fn func(*worker, []int32), rfn func(Reader, []int32)) {
	var wg sync.WaitGroup
	for topic, w := range workers {
		wg.Go(func() { fn(w, parts[topic]) })
	}
	for topic, r := range readers {
		wg.Go(func() { rfn(r, parts[topic]) })
	}
	wg.Wait()
}

// onAssigned runs when the group assigns the worker partitions of its source
// (possibly none).
func (w *worker) onAssigned(ids []int32) {
	w.assigned.Store(true)
	w.trackFirst(ids, true)
	w.owners.set(w.source, ids, true)
}

// onRevoked runs when partitions of its source move to another member.
func (w *worker) onRevoked(ctx context.Context, ids []int32) {
	w.markLeaving(ids)
	w.trackFirst(ids, false)
	w.revoked(ctx, ids)
}

// onLost runs when the worker's group session ended.
func (w *worker) onLost(ctx context.Context, ids []int32) {
	w.markLeaving(ids)
	w.assigned.Store(false) // until the group takes it back
	w.trackFirst(ids, false)
	w.lost(ctx, ids)
}

// trackFirst sets ownsFirst to own if ids include partition 0 of the source.
func (w *worker) trackFirst(ids []int32, own bool) {
	if slices.Contains(ids, 0) {
		w.ownsFirst.Store(own)
	}
}

// markLeaving marks the partitions ids leaving, first thing in a callback
// that takes them away. The worker's loop runs beside the callback, and
// would otherwise hand on their records while the callback drains, flushes
// and commits them (rebalance.go) or commits up to where their reading came
// (rebalance_lost.go): a record taken after the commit is delivered again
// by the next owner. The loop takes no head of a partition leaving, releases
// none of its held records, moves none ahead and starts no background
// commit of it (releaseHeads, releaseHeld, moveAhead, commit), as when it
// sat in a poll that the rebalance held back. forget drops the partitions
// at the callback's end.
func (w *worker) markLeaving(ids []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if p, ok := w.parts[id]; ok {
			p.leaving = true
		}
	}
}
