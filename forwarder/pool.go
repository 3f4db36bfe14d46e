package forwarder

import "sync/atomic"

// MaxBufferedBytes is split in two halves. One is reserved: each forwarder
// may always hold its equal part of it (buffer.limit), so a burst in one
// never keeps another from fetching. The other half is a bufferPool that
// forwarders borrow from while every record they hold is on its way out
// (due, or due within a fetch wait).
//
// Why borrow: with 19 forwarders, an equal share of all 64 MiB is 3.4 MiB,
// less than one fetch of small records counted with their bookkeeping. A
// forwarder moving a burst then alternated between routing one fetch and
// waiting for its acknowledgements, never fetching while it produced: a
// quarter of a raw copy's throughput (docs/BENCHMARKS.md). Borrowed bytes
// come back within a produce round trip, since the records holding them
// are being produced; a forwarder that holds a record for a later time (a
// remainder below the smallest level, a retry, a level's record not due
// yet) borrows no more, so the pool is never tied up for a level's length.
//
// The bound stays what Config.MaxBufferedBytes says: the reserves and the
// pool add up to it, and each forwarder may exceed what it was allowed by
// the fetch that found it full, as before.

// bufferPool is the half of MaxBufferedBytes no forwarder reserves, shared by
// every forwarder of a Forwarder. Forwarders tell it what they hold from
// their own loops, so it is atomic rather than locked.
type bufferPool struct {
	limit int64        // bytes that may be borrowed in all
	lent  atomic.Int64 // bytes held beyond the forwarders' reserves now
	held  atomic.Int64 // bytes all forwarders hold now
	peak  atomic.Int64 // the most held at once: what the bound promises
}

// newBufferPool makes the pool of what cfg's forwarders do not reserve.
func newBufferPool(cfg *Config) *bufferPool {
	return &bufferPool{limit: cfg.MaxBufferedBytes - int64(len(cfg.stages()))*cfg.bufferReserve()}
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

// drained reports whether borrowers have given back half the pool: a
// forwarder that stopped fetching for want of it resumes then, so that a
// whole fetch arrives before the next pause, as a full buffer resumes at
// half its reserve.
func (p *bufferPool) drained() bool { return p != nil && p.lent.Load() <= p.limit/2 }

// toDrain is how many bytes must be given back before drained.
func (p *bufferPool) toDrain() int64 { return p.lent.Load() - p.limit/2 }
