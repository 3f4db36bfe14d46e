package forwarder

import "time"

// A record below the smallest level waits in the memory of the worker that
// took it, and holds its partition's commit point until it is handed on.
// When the partition moves to another member (a revoke) or the process
// stops, waiting for it to fall due held the move up to the smallest level,
// and a revoke holds more than its own partitions: while any rebalance
// callback runs, the shared client polls nothing for any stage
// (BlockRebalanceOnPoll), so every record not fetched yet waited with it. In
// a rolling restart those waits set the lateness (docs/RELIABILITY.md,
// "Rolling restart").
//
// So a held record is handed back instead: written to the ingress with its
// route (the hop's headers, its absolute due time), as a hop to the next
// level would be. Once the broker has it, its partition may be committed
// past it, and whoever owns the ingress partition it lands on holds it until
// due, as it would any record written to the ingress. Nothing is delivered
// twice: the commit moves past the original only once the copy is
// acknowledged, and a revoke or a stop waits for that (a few milliseconds,
// not up to the smallest level). Exactly-once writes the copy in the
// transaction that commits the offsets past its original.
//
// A record due within handBackAfter is delivered by waiting for it, as
// before: writing it back would make it later than the wait.
const handBackAfter = 20 * time.Millisecond

// handBack writes back to the ingress the held records of partitions that
// leave is true for, except those due within handBackAfter and those
// waiting to retry a failed produce to their target (already due). A record
// a command changed is released instead, which routes it again. mu must be
// held.
func (w *worker) handBack(leave func(*partition) bool, now time.Time) {
	w.recheckHeld(now)
	w.releaseHeld(now, true) // what a command changed is due now
	back := w.held.take(func(e *entry) bool {
		return !e.part.gone && leave(e.part) && e.attempts == 0 && e.at.Sub(now) > handBackAfter
	})
	if len(back) == 0 {
		return
	}
	ingress := w.cfg.Topics.Ingress()
	for _, e := range back {
		e.part.waiting--
		env, err := parse(e.src, w.rules)
		if err != nil { // it was routed from this record: cannot happen
			w.deadLetter(e, err.Error())
			continue
		}
		env.Due = e.due // a command may have changed it since
		e.out, e.due, e.at = env.hop(e.next(), ingress, now), time.Time{}, time.Time{}
		w.count(HandedBack)
		w.produce(e)
	}
	w.log.Info("handed_back", "records", len(back))
}
