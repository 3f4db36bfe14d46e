package forwarder

import (
	"math/bits"
	"sync/atomic"
)

// MaxBufferedBytes is split in three. Half is reserved: each forwarder may
// always hold its equal part of it (buffer.limit), so a burst in one never
// keeps another from fetching. A quarter is a bufferPool that forwarders
// borrow from for records due soon (see "Who borrows"), and half of what the
// reserves leave unused is lent beside it (see "Unused reserves"). The last
// quarter is filled only while idle forwarders fill reserves lent to others:
// Go's heap grows to about twice what is live before it collects, and that
// headroom, with the soft memory limit serve sets
// (cmd/kdelay/memory_limit.go), keeps the default within a 128 MiB
// container. Measured with a burst of 1,000,000 records due at once on
// Apache Kafka: peak RSS 79 MB with no pool, 115 MB with this quarter, 149
// MB with a pool of half (docs/BENCHMARKS.md); so no forwarder borrows more
// than the quarter.
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
// Unused reserves: with the default 18 levels, the reserves are 32 MiB of
// which a steady load uses the ingress's and those of the few levels its
// delays pass through; the rest, reserved by levels with nothing to do, was
// never used, and at 20,000 records/s the forwarders that had records to
// hold stopped fetching for want of the pool beside them
// (docs/BENCHMARKS.md, "Sustained rate"). Half of what the reserves leave
// unused is lent too, and not all of it, so that the bound holds without
// taking anything back: a level that wakes while its reserve is lent fills
// it all the same, and what was lent of it comes back within the smallest
// level, as all that is borrowed does.
//
// The bound stays what Config.MaxBufferedBytes says: the reserves, the
// quarter and half the reserves add up to all of it, and each forwarder may
// exceed what it was allowed by the fetch that found it full, as before.
// While no reserve that was lent is filled, they add up to three quarters.
//
// Memory held beside the records: MaxBufferedBytes covers what
// Config.SharedBytes reports too, the index of serve's scheduler (under 72
// bytes a schedule, docs/SCHEDULES.md). The reserves and the quarter shrink
// in proportion, so records and index together stay within the bound: a
// million schedules beside a busy forwarder peaked at 148-154 MB of RSS,
// against 179 MB while the bound did not count the index (BENCHMARKS.md; the
// client's fetched records, not counted, are the rest). Records keep at least minBufferShare a forwarder, as the smallest
// MaxBufferedBytes allowed, so an index larger than the bound leaves every
// forwarder fetching, slowly. The shares follow the index as it changes: a
// forwarder whose reserve shrank below what it holds is full until it has
// handed enough on, as after a burst.

// bufferPool is what forwarders borrow from beyond their reserves, shared by
// every forwarder of a Forwarder: the quarter of MaxBufferedBytes, and half
// of what the reserves leave unused (see "Unused reserves"). Forwarders tell
// it what they hold from their own loops, so it is atomic rather than
// locked.
type bufferPool struct {
	limit    int64        // the quarter: what may be borrowed beside the unused reserves, and what one forwarder may borrow
	budget   int64        // MaxBufferedBytes; 0 shares nothing (shared unused)
	least    int64        // what records keep however large shared is: minBufferShare a forwarder
	shared   func() int64 // bytes held beside the records that budget covers too: Config.SharedBytes; nil if none
	lent     atomic.Int64 // bytes held beyond the forwarders' reserves now
	held     atomic.Int64 // bytes all forwarders hold now
	reserves atomic.Int64 // the reserves of the forwarders running
	within   atomic.Int64 // of them, what the forwarders hold now
	peak     atomic.Int64 // the most held at once: what the bound promises
}

// newBufferPool makes the pool cfg's forwarders borrow from.
func newBufferPool(cfg *Config) *bufferPool {
	return &bufferPool{limit: cfg.MaxBufferedBytes / 4, budget: cfg.MaxBufferedBytes,
		least: int64(len(cfg.stages())) * minBufferShare, shared: cfg.SharedBytes}
}

// scale is n, a part of the budget, shrunk in proportion to what the
// memory held beside the records takes of it (see "Memory held beside the
// records"): n itself while nothing is.
func (p *bufferPool) scale(n int64) int64 {
	if p == nil || p.shared == nil || p.budget <= 0 {
		return n
	}
	records := min(max(p.budget-p.shared(), p.least), p.budget)
	if records == p.budget {
		return n
	}
	// n × records may pass int64 with a budget of a few GiB; n is at
	// most the budget, so the quotient fits.
	hi, lo := bits.Mul64(uint64(n), uint64(records))
	q, _ := bits.Div64(hi, lo, uint64(p.budget))
	return int64(q)
}

// quarter is what may be borrowed beside the unused reserves, and what one
// forwarder may borrow: the quarter of the records' part of the budget.
func (p *bufferPool) quarter() int64 { return p.scale(p.limit) }

// count adds held bytes held by a forwarder, lent of them beyond its reserve
// and within of them within it.
func (p *bufferPool) count(held, lent, within int64) {
	p.lent.Add(lent)
	p.within.Add(within)
	now := p.held.Add(held)
	for {
		peak := p.peak.Load()
		if now <= peak || p.peak.CompareAndSwap(peak, now) {
			return
		}
	}
}

// lendable is what may be lent in all now: the quarter, and half of what
// the reserves leave unused.
func (p *bufferPool) lendable() int64 {
	return p.quarter() + max(p.reserves.Load()-p.within.Load(), 0)/2
}

// room reports whether a forwarder that has borrowed lent may borrow more:
// while the pool has some, and it has borrowed less than the quarter. A nil
// pool (a worker outside a Forwarder) lends nothing.
func (p *bufferPool) room(lent int64) bool {
	return p != nil && p.lent.Load() < p.lendable() && lent < p.quarter()
}

// drained reports whether borrowers have given back enough of the pool for
// one more fetch of fetch bytes (at most half the pool) by a forwarder that
// has borrowed lent: a forwarder that stopped fetching for want of it
// resumes then, so that a whole fetch arrives before the next pause, as a
// full buffer resumes at half its reserve. Not at half the pool, as until
// 2026-11-25: under a steady load borrowers hold records up to the smallest
// level, so every level paused at once until half of them were handed on.
func (p *bufferPool) drained(fetch, lent int64) bool {
	return p != nil && p.lent.Load() <= refill(p.lendable(), fetch) && lent <= refill(p.quarter(), fetch)
}

// refill is what may be lent, of limit, when a forwarder whose fetches
// bring up to fetch bytes resumes.
func refill(limit, fetch int64) int64 { return max(limit-max(fetch, 1), limit/2) }

// pressed reports whether more than half of what may be lent is: forwarders
// that borrow then fetch ahead only what is due within pressedLead
// (resumeLead).
func (p *bufferPool) pressed() bool { return p != nil && p.lent.Load() > p.lendable()/2 }

// toDrain is how many bytes a forwarder that has borrowed lent must see
// given back before drained(fetch, lent).
func (p *bufferPool) toDrain(fetch, lent int64) int64 {
	return max(p.lent.Load()-refill(p.lendable(), fetch), lent-refill(p.quarter(), fetch))
}

// RecordBudget is what the forwarders' records may hold now: MaxBufferedBytes
// less what Config.SharedBytes reports, at least 256 KiB a forwarder (see
// "Memory held beside the records").
func (f *Forwarder) RecordBudget() int64 { return f.pool.scale(f.pool.budget) }
