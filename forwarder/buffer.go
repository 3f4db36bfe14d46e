package forwarder

import (
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordOverhead is what one record held costs beyond its key, value and
// headers: the fetched record, its entry, the record produced and its
// routing headers, and the client's bookkeeping of both: two kgo.Records of
// 160 bytes, an entry of 72, an ack of 24, two routing headers of 40 plus
// their values, and the client's produce and fetch state, rounded up.
// Counting only the bytes a user wrote would let small records use several
// times the bound.
const recordOverhead = 640

// recordSize is what r counts against a worker's buffer while it is held.
func recordSize(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value) + recordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// buffer accounts the records a worker holds: from the fetch that brought
// them until the broker acknowledges what they became (or the partition is
// revoked). Only the loop and the rebalance callbacks touch it, under
// worker.mu.
type buffer struct {
	limit  int64 // the worker's reserve: what it may hold without borrowing (pool.go)
	whole  int64 // the reserve while nothing is held beside the records, limit being it scaled (pool.scale); 0 keeps limit
	joined bool  // the pool counts limit among the reserves (join)
	bytes  int64 // held now
	full   bool  // fetching is paused (or the poll held) until bytes falls to limit/2 or the pool drains
	idle   bool  // the whole topic is paused too (pauseIdle)
	// holding says the worker holds the shared client's poll instead of
	// pausing (pollHold); expired, that it held it too long and pauses
	// until it is no longer full.
	holding, expired bool
	pool             *bufferPool // borrowed from beyond limit; nil outside a Forwarder

	counted int64 // bytes the pool counts for this worker
	lent    int64 // of them, beyond limit

	peak    int64 // the most bytes ever held
	fetch   int64 // the most bytes one poll brought
	high    int64 // the most bytes held since the worker last drained (memory.go)
	fetched int64 // bytes fetched since the last cycle told the memoryReleaser
}

// add counts n more bytes held.
func (b *buffer) add(n int64) {
	b.bytes += n
	b.peak = max(b.peak, b.bytes)
	b.high = max(b.high, b.bytes)
	b.fetched += n
}

// release counts n bytes no longer held.
func (b *buffer) release(n int64) { b.bytes -= n }

// settle tells the pool what the worker holds now, and how much of it is
// borrowed.
func (b *buffer) settle() {
	if b.pool == nil {
		return
	}
	lent := max(b.bytes-b.limit, 0)
	b.pool.count(b.bytes-b.counted, lent-b.lent, (b.bytes-lent)-(b.counted-b.lent))
	b.counted, b.lent = b.bytes, lent
}

// join tells the pool the worker runs: its reserve, unused, may be lent in
// part to the others (pool.go, "Unused reserves") until detach.
func (b *buffer) join() {
	if b.pool != nil {
		b.pool.reserves.Add(b.limit)
		b.joined = true
	}
}

// detach gives back to the pool everything the worker was counted for: it
// has stopped, and what it held is released with it.
func (b *buffer) detach() {
	if b.pool != nil {
		b.pool.count(-b.counted, -b.lent, -(b.counted - b.lent))
		b.pool.reserves.Add(-b.limit)
		b.counted, b.lent, b.joined = 0, 0, false
	}
}

// resize follows the reserve to what the memory held beside the records
// leaves of the budget (pool.go, "Memory held beside the records").
func (b *buffer) resize() {
	if b.whole == 0 {
		return
	}
	limit := b.pool.scale(b.whole)
	if b.joined {
		b.pool.reserves.Add(limit - b.limit)
	}
	b.limit = limit
}

// update follows the reserve to the budget (resize), sets full once bytes
// reach the limit and the worker may not borrow beyond it, and clears it
// once they fall to half the limit, or once a worker that may borrow finds
// room in the pool for one of its fetches: resuming with room for a whole
// fetch lets it arrive before the next pause, rather than pausing and
// resuming on every acknowledgement. borrow says the worker may borrow
// (mayBorrow). It reports whether full changed.
func (b *buffer) update(borrow bool) bool {
	b.resize()
	b.settle()
	switch {
	case !b.full && b.bytes >= b.limit && !(borrow && b.pool.room(b.lent)):
		b.full = true
	case b.full && (b.bytes <= b.limit/2 || borrow && b.pool.drained(b.fetch, b.lent)):
		b.full = false
	default:
		return false
	}
	return true
}

// wakeAfter is how many bytes acknowledged since the loop last applied acks
// may let a full buffer resume: those that bring it back to half its limit,
// or the pool to room for a fetch, whichever is fewer. The produce
// callbacks wake the loop then, so that fetching resumes as soon as it may
// rather than at the next CheckInterval; a wake that finds it still full
// sets the next. 0 when not full.
func (b *buffer) wakeAfter(borrow bool) int64 {
	if !b.full {
		return 0
	}
	n := b.bytes - b.limit/2
	if borrow && b.pool != nil {
		n = min(n, b.pool.toDrain(b.fetch, b.lent))
	}
	return max(n, 1)
}

// throttle pauses every partition that holds records once the buffer is
// full, and resumes them once it has room again. A worker may borrow from
// the pool beyond its limit while what it holds for later fits in its
// limit (mayBorrow). While full, it also pauses a partition that just
// brought its one fetch, and every partition at once while nothing held
// waits long for a time (see pauseIdle).
//
// On the client every stage shares, a worker that would pause everything
// holds the client's next poll instead, for a while (pollHold): its
// records are then on their way to the broker, and their
// acknowledgements make room within a round trip.
func (w *worker) throttle() {
	borrow := w.mayBorrow()
	changed := w.buf.update(borrow)
	idle := w.buf.full && !w.waitsLong()
	if !idle {
		w.buf.expired = false
	}
	hold := idle && !w.buf.expired && w.mayHold()
	holdChanged := w.setHolding(hold)
	idle = idle && !hold
	// The whole topic is paused before its partitions one by one, and
	// resumed after them. Otherwise the client, which builds its next
	// fetch on its own goroutine, may send one of only the partitions not
	// paused yet: idle ones, so it long-polls for FetchMaxWait, and the
	// fetch that a resume needs waits behind it (a held record once came
	// 4.9 s late on Apache Kafka under load, TestFullBufferOfHeldRecords).
	if idle {
		w.pauseIdle(true)
	}
	if changed || holdChanged || w.buf.full {
		for _, p := range w.parts {
			w.setFetching(p)
		}
	}
	if !idle {
		w.pauseIdle(false)
	}
}

// setHolding holds the shared client's poll or releases it, and reports
// whether that changed.
func (w *worker) setHolding(hold bool) bool {
	if hold == w.buf.holding {
		return false
	}
	w.buf.holding = hold
	if hold {
		w.cl.hold.hold(w)
	} else {
		w.cl.hold.release(w)
	}
	return true
}

// mayHold reports whether a full worker may hold the poll: it runs on the
// shared client, and what it holds is on its way to the broker or due now
// (nothing held for a time, no head that waits). Then acknowledgements make
// room within a round trip, which a hold waits for; records held for their
// time make room only at that time, and a hold would only delay the other
// stages.
func (w *worker) mayHold() bool {
	if w.cl.hold == nil || w.stopped || w.runCtx == nil || w.runCtx.Err() != nil || len(w.held) > 0 {
		return false
	}
	now := w.cfg.NowFunc()
	for _, p := range w.parts {
		if len(p.queue) > 0 && w.releaseAt(p.queue[0], now).After(now) {
			return false
		}
	}
	return true
}

// expireHold ends a hold of the poll that lasted the longest a poll waits
// (pollHold.wait): the worker pauses its source instead, until it is no
// longer full.
func (w *worker) expireHold() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.buf.holding {
		w.buf.holding = false
		w.buf.expired = true
		w.log.Debug("poll_hold_expired", "held_bytes", w.buf.bytes)
		w.throttle()
		w.tellWait(w.cfg.NowFunc())
	}
}

// setFetching pauses or resumes the fetching of p for either reason that
// stops it: its buffered records are not due soon (notDue), or the worker
// holds as much as it may and p holds some of it. A partition that holds
// nothing is fetched even when the worker is full, unless pauseIdle says
// otherwise: the others' records may wait to be due for as long as their
// level, and this one's must not wait behind them. That lets each partition
// bring one fetch beyond the limit.
func (w *worker) setFetching(p *partition) {
	pause := p.notDue || (w.buf.full && !w.buf.holding && p.holds())
	if pause == p.paused {
		return
	}
	p.paused = pause
	if pause {
		w.cl.pause(p.id)
	} else {
		w.cl.resume(p.id)
	}
}

// pauseIdle pauses the whole source topic, on top of the partitions paused
// one by one, while the buffer is full and nothing it holds waits long for a
// time (see waitsLong): what the worker holds then is on its way to the
// broker, or held below the smallest level, and frees room within a round
// trip or that level, so the partitions that hold nothing can wait too.
// Fetching them would not bring their records much sooner, and would slow
// the others: the client fetches from a broker one request at a time, a
// request for partitions with nothing new waits FetchMaxWait at the broker,
// and the partitions resumed meanwhile wait behind it. That halved a burst's
// throughput or worse (docs/BENCHMARKS.md), and with records held for their
// time it made each refill wait FetchMaxWait (TestFullBufferOfHeldRecords).
// With the whole topic paused no fetch is sent for it, so on a client of its
// own (exactly-once) the one that resumes it starts at once. On the client
// every stage shares (at-least-once) the other stages' idle partitions may
// hold a fetch in flight, for FetchMaxWait at most (DefaultFetchMaxWait):
// there a worker whose records are all on their way holds the poll instead
// (throttle, pollHold), and pauses only once the hold lasted too long.
func (w *worker) pauseIdle(pause bool) {
	if pause == w.buf.idle {
		return
	}
	w.buf.idle = pause
	if pause {
		w.cl.pauseSource()
	} else {
		w.cl.resumeSource()
	}
}

// mayBorrow reports whether the worker may hold more than its limit,
// borrowing from the pool: while what it holds for later fits in its limit,
// so that what it borrows is spent on records due within the smallest level
// and comes back within it. Records due later wait in Kafka rather than in
// the pool, where they would keep another forwarder's due records out. A
// remainder held below the smallest level is due within it; until
// 2026-11-25 one such remainder kept a forwarder from borrowing at all, and
// a level of 1s holding remainders at 5,000 records/s was held to its
// reserve and delivered seconds late (docs/BENCHMARKS.md, "Sustained
// rate").
func (w *worker) mayBorrow() bool { return w.later(w.cfg.NowFunc()) < w.buf.limit }

// later is what the worker holds that is not due within the smallest level
// from now: the queued records due after it, and records held for a retry
// after a failed produce, which may last until DeliveryTimeout. A remainder
// held below the smallest level is due within it, and a record produced and
// not yet acknowledged comes back within a round trip.
func (w *worker) later(now time.Time) int64 {
	horizon := now.Add(w.cfg.Levels.Smallest().Delay)
	var n int64
	for _, p := range w.parts {
		k := len(p.queue)
		if k == 0 || !w.releaseAt(p.queue[k-1], now).After(horizon) {
			continue
		}
		// A partition's records are due in offset order, as kdelay writes
		// them; its queued bytes are shared out by count, the records of
		// one topic being alike in size.
		i := sort.Search(k, func(i int) bool { return w.releaseAt(p.queue[i], now).After(horizon) })
		n += p.queued * int64(k-i) / int64(k)
	}
	// Counted as records are held and recounted each cycle, not summed
	// here: at 10,000 records/s a level holds thousands of remainders, and
	// summing them at every throttle took 8% of serve's CPU.
	return n + w.heldRetry
}

// waitsLong reports whether the worker holds a record it may not hand on
// within the smallest level: a partition's queued records due after it, or
// a record held for a retry after a failed produce, which may last until
// DeliveryTimeout. The partitions that hold nothing must go on fetching then,
// or their records would wait that long behind a full buffer. A remainder
// below the smallest level does not count: it is handed on within that
// level, which is as long as a record fetched meanwhile could wait. Not
// "a partition paused as not due soon": that is relative to the resume lead,
// FetchMaxWait (5s) and more by default, and a full level of 5s, whose
// records are all due within it, paused its topic while its partitions
// took turns to drain (TestFullLevelStillFetchesIdlePartitions).
func (w *worker) waitsLong() bool { return w.later(w.cfg.NowFunc()) > 0 }

// forgetBuffered releases what a revoked or lost partition held: its queue
// and the records taken from it the broker has not acknowledged. Late acks
// for it are ignored, so nothing is released twice.
func (w *worker) forgetBuffered(p *partition) {
	w.buf.release(p.queued)
	p.queued = 0
	for _, e := range p.window {
		if !e.done {
			w.buf.release(e.size)
		}
	}
}
