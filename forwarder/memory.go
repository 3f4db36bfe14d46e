package forwarder

import (
	"context"
	"sync/atomic"
	"time"
)

// After a burst, kdelay serve would keep the memory it used to route it for
// two minutes. While records flow, the heap grows to twice what was live at
// the last collection; once they stop, nothing allocates, so no collection
// runs, and the runtime's scavenger keeps every page under that last goal
// until the runtime forces a collection, 2 minutes after the previous one.
// docs/BENCHMARKS.md ("Memory: what limits it") has the figures.
//
// So a forwarder that held a large part of its buffer and has handed most of
// it on (drained) asks the memoryReleaser to collect and return the free
// pages to the operating system, once fetching has gone quiet. A forwarder
// in the middle of a burst seldom asks: its buffer swings between full and
// half full, not down to a quarter of what it held.
//
// A soft memory limit (debug.SetMemoryLimit) does not do it: the scavenger
// keeps RSS just under the limit, not under what is live, and the limit must
// stay above MaxBufferedBytes plus the runtime's own, or a full buffer would
// make the collector run without end. Measured with a limit of 48 MiB, RSS
// stayed as far above idle as with none.

// memoryReleaseInterval is the least time between two releases of memory. A
// release is a full collection plus returning every free page, which the
// next burst faults in again: 10 to 25 ms of CPU for 80 MB freed, measured.
const memoryReleaseInterval = 10 * time.Second

// memoryReleaseQuiet is how long after a drain the forwarders must have
// fetched less than half a share for memory to be released. A drain is not
// always the end of a burst: a level whose burst falls due hands on what it
// had fetched ahead, drains, and fetches the rest at once. Releasing then
// would collect in the middle of the burst and return pages it faults in
// again right away.
const memoryReleaseQuiet = time.Second

// memoryReleaser gives memory back to the operating system once forwarders
// drained and fetching has gone quiet, on its own goroutine, so that no
// forwarder's loop waits for a collection, and at most once per
// memoryReleaseInterval: forwarders that drain in the meantime share the
// next release, at the end of the interval.
type memoryReleaser struct {
	free     func() // collects and returns free memory: debug.FreeOSMemory
	now      func() time.Time
	interval time.Duration
	quiet    time.Duration
	busy     int64         // bytes fetched within quiet that postpone a release: half a share
	drains   chan struct{} // a forwarder drained since the last release
	fetched  atomic.Int64  // bytes the forwarders fetched since the release was planned
}

func newMemoryReleaser(cfg *Config) *memoryReleaser {
	return &memoryReleaser{
		free: cfg.freeMemory, now: cfg.NowFunc, interval: memoryReleaseInterval, quiet: memoryReleaseQuiet,
		busy: cfg.bufferShare() / 2, drains: make(chan struct{}, 1),
	}
}

// drained tells the releaser a forwarder handed on most of what it held. It
// never blocks. A nil releaser (a worker outside a Forwarder) ignores it.
func (r *memoryReleaser) drained() {
	if r == nil {
		return
	}
	select {
	case r.drains <- struct{}{}:
	default: // a release is already asked for
	}
}

// fetch tells the releaser a forwarder fetched n bytes of records.
func (r *memoryReleaser) fetch(n int64) {
	if r != nil && n > 0 {
		r.fetched.Add(n)
	}
}

// run releases memory after each drain once fetching is quiet, at most once
// per interval, until ctx ends.
func (r *memoryReleaser) run(ctx context.Context) error {
	var last time.Time       // of the last release; zero before the first
	var due <-chan time.Time // set while a release is planned
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.drains:
			if due == nil {
				r.fetched.Store(0)
				due = time.After(r.wait(last))
			}
		case <-due:
			if r.fetched.Swap(0) >= r.busy {
				due = time.After(r.quiet) // still busy: look again
				continue
			}
			due = nil
			r.free()
			last = r.now()
		}
	}
}

// wait is how long from now a release planned now waits: quiet, and at least
// until interval after the last release.
func (r *memoryReleaser) wait(last time.Time) time.Duration {
	if last.IsZero() {
		return r.quiet
	}
	return max(r.quiet, last.Add(r.interval).Sub(r.now()))
}

// releaseIfDrained asks for memory to be released once the worker has handed
// on most of what it held, after holding at least half its reserve since the
// last time it asked, and tells the releaser what it fetched since the last
// cycle. mu must be held.
func (w *worker) releaseIfDrained() {
	b := &w.buf
	w.mem.fetch(b.fetched)
	b.fetched = 0
	if b.high < b.limit/2 || b.bytes > b.high/4 {
		return
	}
	b.high = b.bytes
	w.mem.drained()
}
