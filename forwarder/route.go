package forwarder

import "time"

// route decides where a record released at base goes next. base is when it
// was due to leave its topic, which is no later than now: planning from it
// rather than from now keeps a late release from pushing the record into a
// shorter level, and the level chosen still never outlasts the due time.
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
		e.out, e.due = env.delivery(), env.Due
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
	if l, ok := w.cfg.Levels.For(env.Due.Sub(base)); ok {
		e.out = env.hop(w.cfg.Topics.Level(l.Name), base)
		w.count(Hopped)
		w.produce(e)
		return
	}
	// Below the smallest level: hold it in memory until due, without
	// blocking the records behind it. Its offset stays uncommitted until it
	// is handed on, so a crash re-reads it.
	e.out, e.due = env.delivery(), env.Due
	e.at = env.Due
	w.count(Held)
	w.hold(e)
}
