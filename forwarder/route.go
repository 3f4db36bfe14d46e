package forwarder

import "time"

// route decides where a record released at base goes next. base is when it
// was due to leave its topic, which is no later than now; a hop is planned
// from it unless it is too far behind now (hopBase), and the level chosen
// never outlasts the due time.
func (w *worker) route(e *entry, base, now time.Time) {
	env, err := parse(e.src, w.rules)
	if err != nil {
		w.deadLetter(e, err.Error())
		return
	}
	e.id, e.lateFrom = env.ID, time.Time{}
	if !w.obey(e, &env) {
		return
	}
	if !env.Due.After(now) {
		e.out, e.due = env.delivery(e.next()), env.Due
		if w.level == IngressLevel && env.Due.Before(e.src.Timestamp) {
			// Written already past due: its lateness is the producer's.
			// Counted apart, and its delivery's lateness from when it
			// was written (now, if the writer's clock is ahead), so that
			// an alert on lateness fires for kdelay's, not for a
			// producer that sent yesterday's time.
			e.lateFrom = earliest(e.src.Timestamp, now)
			w.count(PastDue)
		}
		w.produce(e)
		return
	}
	base = w.hopBase(env.Due, base, now)
	if l, ok := w.cfg.Levels.For(env.Due.Sub(base)); ok && !w.holdInstead(env.Due, base, now) {
		e.out = env.hop(e.next(), w.cfg.Topics.Level(l.Name), base)
		w.count(Hopped)
		w.produce(e)
		return
	}
	// Below the smallest level: hold it in memory until due, without
	// blocking the records behind it. Its offset stays uncommitted until it
	// is handed on, so a crash re-reads it.
	e.out, e.due = env.delivery(e.next()), env.Due
	e.at = env.Due
	w.count(Held)
	w.hold(e)
}

// maxHopAge is how far behind now a hop's timestamp may be. A level
// partition is in due order only while every hop is written about when it
// is stamped: the one stamped base and written later sits behind hops
// stamped up to now, and the level releases it only after them, as late
// as its release was, hop after hop. Stamped now and planned from now
// instead, it is never late for the lateness it came with, but a delay that
// is a sum of levels (3h: 2h, then 1h) then takes shorter ones, five hops
// instead of one: so only a release later than any the machine's jitter
// makes, as after an outage, is planned from now; a few milliseconds, or
// a hundred on a loaded machine, stay planned from base.
const maxHopAge = time.Second

// hopBase is what a record due at due, released at base, is planned from:
// base itself, which never lets a release a little late push the record
// into a shorter level (a delay of exactly a level takes that level),
// unless base is more than maxHopAge behind now and a level still fits from
// now. Not when none does: the record would then wait in memory, as a
// remainder, rather than in a level, and under a load beyond what the
// machine forwards, when releases are seconds late, remainders filled the
// memory (at 50,000 records/s on Apache Kafka p50 4.3-5.1 s against 1.1-3.0
// s, peak RSS 131-144 MB against 116). Stamped base, it is due at once in
// its level, behind at most what was written meanwhile.
func (w *worker) hopBase(due, base, now time.Time) time.Time {
	if now.Sub(base) > maxHopAge {
		if _, ok := w.cfg.Levels.For(due.Sub(now)); ok {
			return now
		}
	}
	return base
}

// holdInstead reports whether a record that a level fits from base is held
// until due instead, because none fits from now. A hop is stamped base; one
// written a little after base sits behind the hops written in between and
// leaves its level that much after base plus the level, so that each hop
// adds the time it took to write, which the plan from base does not see.
// Over hops of the smallest level that adds up, and the remainder held at
// the end absorbs it only if it is longer. A record due within the smallest
// level of now is held instead, and leaves at its due time: what it adds to
// memory is what any remainder does, due within the smallest level.
//
// Not in exactly-once: there a partition that holds a record takes at most
// maxTxnWindow records past it until it leaves (txn_skips.go), and holding
// for up to the smallest level what a hop would have written at once held
// back the records behind it, far later at the median than the hops were.
// Nor once base is more than maxHopAge behind now (after an outage, or
// under a load beyond what the machine forwards): hopBase keeps those in
// levels rather than in memory, for the reason it gives.
func (w *worker) holdInstead(due, base, now time.Time) bool {
	if w.txn != nil || now.Sub(base) > maxHopAge {
		return false
	}
	_, fits := w.cfg.Levels.For(due.Sub(now))
	return !fits
}
