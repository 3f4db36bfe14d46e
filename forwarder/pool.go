package forwarder

import "sync/atomic"

// MaxBufferedBytes is split in three. Half is reserved: each forwarder may
// always hold its equal part of it (buffer.limit), so a burst in one never
// keeps another from fetching. A quarter is a bufferPool that forwarders
// borrow from for records due soon (see "Who borrows"). The last quarter is
// never filled with records: Go's heap grows to about twice what is live
// before it collects, and that headroom, with the soft memory limit serve
// sets (cmd/kdelay/memory_limit.go), keeps the default within a 128 MiB
// container. Measured with a
// burst of 1,000,000 records due at once on Apache Kafka: peak RSS 79 MB
// with no pool, 115 MB with this quarter, 149 MB with a pool of half
// (docs/BENCHMARKS.md).
//
// Why borrow: with 19 forwarders, an equal share of all 64 MiB is 3.4 MiB,
// less than one fetch of small records counted with their bookkeeping. A
// forwarder moving a burst then alternated between routing one fetch and
// waiting for its acknowledgements, never fetching while it produced: a
// quarter of a raw copy's throughput (docs/BENCHMARKS.md). A pool of 16 MiB
// moves records as fast as one of 32 MiB did: the ingress of the throughput
// benchmark held up to 13 MB. Under a steady load the same holds for the
// levels records pass through: a level of 1s holds a second of its records,
// more than its reserve from a few thousand records a second.
//
// Who borrows: a forwarder may hold beyond its reserve while what it holds
// for later, records due after the smallest level from now or held for a
// retry, fits in its reserve (worker.mayBorrow). So what it borrows is spent
// on records due within the smallest level, and comes back within it; the
// pool is never tied up for a level's length, and records due later wait in
// Kafka, not in memory another forwarder's due records need. Once more than
// half the pool is lent (pressed), forwarders that borrow fetch ahead only
// what is due within pressedLead rather than FetchMaxWait
// (worker.resumeLead): memory goes to the records due soonest.
//
// The bound stays what Config.MaxBufferedBytes says, and more than kept:
// the reserves and the pool add up to three quarters of it, and each
// forwarder may exceed what it was allowed by the fetch that found it full,
// as before.

// bufferPool is the quarter of MaxBufferedBytes forwarders borrow from,
// shared by every forwarder of a Forwarder. Forwarders tell it what they
// hold from their own loops, so it is atomic rather than locked.
type bufferPool struct {
	limit int64        // bytes that may be borrowed in all
	lent  atomic.Int64 // bytes held beyond the forwarders' reserves now
	held  atomic.Int64 // bytes all forwarders hold now
	peak  atomic.Int64 // the most held at once: what the bound promises
}

// newBufferPool makes the pool cfg's forwarders borrow from.
func newBufferPool(cfg *Config) *bufferPool {
	return &bufferPool{limit: cfg.MaxBufferedBytes / 4}
}

// count adds held bytes held by a forwarder, lent of them beyond its reserve.
func (p *bufferPool) count(held, lent int64) {
	p.lent.Add(lent)
	now := p.held.Add(held)
	for {
		peak := p.peak.Load()
		if now <= peak || p.peak.CompareAndSwap(peak, now) {
			return
		}
	}
}

// room reports whether a forwarder may borrow more: a nil pool (a worker
// outside a Forwarder) lends nothing.
func (p *bufferPool) room() bool { return p != nil && p.lent.Load() < p.limit }

// drained reports whether borrowers have given back enough of the pool for
// one more fetch of fetch bytes (at most half the pool): a forwarder that
// stopped fetching for want of it resumes then, so that a whole fetch
// arrives before the next pause, as a full buffer resumes at half its
// reserve. Not at half the pool, as until 2026-11-25: under a steady load
// borrowers hold records up to the smallest level, so every level paused at
// once until half of them were handed on (at 10,000 records/s the max
// lateness fell from 880 and 923 ms to 766 and 708 ms; what remains of it
// is not this).
func (p *bufferPool) drained(fetch int64) bool { return p != nil && p.lent.Load() <= p.refill(fetch) }

// refill is what may be lent when a forwarder whose fetches bring up to
// fetch bytes resumes.
func (p *bufferPool) refill(fetch int64) int64 { return max(p.limit-max(fetch, 1), p.limit/2) }

// pressed reports whether more than half the pool is lent: forwarders that
// borrow then fetch ahead only what is due within pressedLead (resumeLead).
func (p *bufferPool) pressed() bool { return p != nil && p.lent.Load() > p.limit/2 }

// toDrain is how many bytes must be given back before drained(fetch).
func (p *bufferPool) toDrain(fetch int64) int64 { return p.lent.Load() - p.refill(fetch) }
