package forwarder

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A produce the broker did not take is tried again after a backoff that
// doubles from retryBackoffMin up to retryBackoffMax.
const (
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 30 * time.Second
)

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
	if e.dead && (errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)) && w.shrink(e) {
		w.produce(e)
		return
	}
	if reason, final := refused(e.out, err); final && !e.dead {
		w.deadLetter(e, reason)
		return
	}
	e.attempts++
	backoff := min(retryBackoffMin<<min(e.attempts-1, 10), retryBackoffMax)
	level := slogLevel(e.dead)
	w.log.Log(context.Background(), level, "produce_failed", "to", e.out.Topic, "source", source(e.src),
		"attempt", e.attempts, "retry_in", backoff, "err", err)
	e.at = now.Add(backoff)
	w.stats.Retried++
	w.held = append(w.held, e)
}
