package forwarder

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Stats counts what a Forwarder did since it started.
type Stats struct {
	Delivered    int64 // records produced to their target
	Hopped       int64 // records produced to a level topic
	Held         int64 // remainders below the smallest level held until due
	DeadLettered int64 // records produced to the DLQ
	Retried      int64 // produces that failed and were tried again
}

func (s *Stats) add(o Stats) {
	s.Delivered += o.Delivered
	s.Hopped += o.Hopped
	s.Held += o.Held
	s.DeadLettered += o.DeadLettered
	s.Retried += o.Retried
}

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
	if !env.due.After(now) {
		e.out = env.delivery()
		w.stats.Delivered++
		w.produce(e)
		return
	}
	if l, ok := w.cfg.Levels.For(env.due.Sub(base)); ok {
		e.out = env.hop(w.cfg.Topics.Level(l.Name), base)
		w.stats.Hopped++
		w.produce(e)
		return
	}
	// Below the smallest level: hold it in memory until due, without
	// blocking the records behind it. Its offset stays uncommitted until it
	// is handed on, so a crash re-reads it.
	e.out = env.delivery()
	e.at = env.due
	w.stats.Held++
	w.stats.Delivered++
	w.held = append(w.held, e)
}

func (w *worker) deadLetter(e *entry, reason string) {
	w.log.Warn("dead_letter", "source", source(e.src), "reason", reason)
	e.out = deadLetter(w.cfg.Topics.DLQ(), e.src, reason)
	e.dead = true
	e.attempts = 0
	w.stats.DeadLettered++
	w.produce(e)
}

// produce hands e.out to the client. The callback only records the outcome:
// the loop acts on it under mu, so a callback never waits on the loop while
// the loop waits on the client for buffer space.
func (w *worker) produce(e *entry) {
	w.cl.Produce(context.Background(), e.out, func(_ *kgo.Record, err error) {
		w.ackMu.Lock()
		defer w.ackMu.Unlock()
		w.acks = append(w.acks, ack{e, err})
		if err != nil {
			w.failed = true
			if w.wakeFn != nil {
				w.wakeFn()
			}
		}
	})
}

// applyAcks marks acknowledged records done and decides what to do with
// failed ones: records the broker refuses for good go to the DLQ with the
// reason, anything else is tried again after a backoff.
func (w *worker) applyAcks(now time.Time) {
	w.ackMu.Lock()
	acks := w.acks
	w.acks = nil
	w.failed = false
	w.ackMu.Unlock()
	for _, a := range acks {
		switch e := a.e; {
		case e.part.gone:
		case a.err == nil:
			e.done = true
			// Let go of what was handed on now rather than at the next
			// commit: at full speed a commit interval holds many records.
			e.part.commitPoint()
		case errors.Is(a.err, kgo.ErrClientClosed), errors.Is(a.err, context.Canceled):
			// Shutting down: left uncommitted, the next owner re-reads it.
		default:
			w.retryOrDeadLetter(e, a.err, now)
		}
	}
}

func (w *worker) retryOrDeadLetter(e *entry, err error, now time.Time) {
	if reason, final := refused(e.out, err); final && !e.dead {
		w.deadLetter(e, reason)
		return
	}
	e.attempts++
	backoff := min(100*time.Millisecond<<min(e.attempts-1, 10), 30*time.Second)
	level := slogLevel(e.dead)
	w.log.Log(context.Background(), level, "produce_failed", "to", e.out.Topic, "source", source(e.src),
		"attempt", e.attempts, "retry_in", backoff, "err", err)
	e.at = now.Add(backoff)
	w.stats.Retried++
	w.held = append(w.held, e)
}
