package forwarder

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A produce the broker did not take is tried again after a backoff that
// doubles from retryBackoffMin up to retryBackoffMax. Before that, the
// client itself tries clientRetries more times, about 1.5 s with its own
// backoff (FailoverOpts). In exactly-once the client tries until the
// transaction's end gives up instead (txnOpts): a failed record aborts
// every stage's work since the last commit.
const (
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 30 * time.Second
	clientRetries   = 4
)

// produce hands e.out to the client, which tells landed the outcome.
func (w *worker) produce(e *entry) {
	// The record is stamped here, as the client would stamp it, so that
	// the clock is read once per record, not twice. A retry keeps its
	// stamp, as with the client; a dead letter is a new record, stamped
	// anew.
	var now time.Time
	if e.first.IsZero() {
		now = w.cfg.NowFunc()
		e.first = now
	}
	if e.out.Timestamp.IsZero() {
		if now.IsZero() {
			now = w.cfg.NowFunc()
		}
		e.out.Timestamp = now
	}
	e.part.flying++
	w.noteProduced()
	w.tx.produces++
	if w.txn != nil && !e.due.IsZero() {
		w.handing.uncommittedDue = earliest(w.handing.uncommittedDue, e.due)
	}
	// The record goes on in the context the client's hooks gave the record
	// it came from (nil without hooks): a tracing hook such as kotel's then
	// makes its publish span a child of the receive span, and the trace
	// goes on. Set at every try, so that a retry is a sibling of the
	// failed publish, not its child.
	e.out.Context = e.src.Context
	w.cl.produce(e.out, e)
}

// landed takes the client's answer for e's record. It only records it: the
// loop acts on it under mu, so a callback never waits on the loop while the
// loop waits on the client for buffer space. It reads what produce set of e:
// nothing changes that until the loop applies the answer.
func (w *worker) landed(e *entry, err error) {
	if err == nil && !e.due.IsZero() {
		// Here, not when the loop applies the ack: that may be a
		// CheckInterval later, and this is when consumers can read it.
		due := e.due
		if !e.lateFrom.IsZero() {
			due = e.lateFrom
		}
		w.obs.Delivered(w.cfg.NowFunc().Sub(due))
	}
	if w.inbox.putAck(ack{e, err}) {
		w.wake()
	}
}

// applyAcks marks acknowledged records done and decides what to do with
// failed ones: records the broker refuses for good go to the DLQ with the
// reason, anything else is tried again after a backoff.
func (w *worker) applyAcks(now time.Time) {
	acks := w.inbox.takeAcks()
	defer w.inbox.returnAcks(acks)
	for _, a := range acks {
		a.e.part.flying--
		switch e := a.e; {
		case e.part.gone:
		case a.err == nil:
			// Counted here, once its target has it: a record held in
			// memory may still be cancelled or moved, and a retry is the
			// same delivery.
			if !e.due.IsZero() {
				w.count(Delivered)
			}
			if w.txn == nil {
				w.progress(now)
			}
			if e.mark != nil {
				w.markMoved(*e.mark)
			} else if e.due.IsZero() && !e.dead && e.id != "" && w.cmds.any() {
				w.hopLanded(e, now)
			}
			e.done = true
			w.buf.release(e.size)
			// A dead letter the DLQ refuses holds every entry behind it in
			// the window: keep them small.
			e.letGo()
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
	w.noteFailure(StuckProduce, err)
	if e.dead && (errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)) && w.shrink(e) {
		w.produce(e)
		return
	}
	if reason, final := refused(e.out, err); final && !e.dead {
		w.deadLetter(e, reason)
		return
	}
	if !errors.Is(err, kgo.ErrRecordRetries) && !errors.Is(err, kgo.ErrRecordTimeout) {
		e.lastErr = err
	}
	// A dead letter is not given up on: there is nowhere left to put it.
	// It is retried until the DLQ takes it, logged at error, and holds its
	// partition's commit point meanwhile (docs/RELIABILITY.md, "The guarantees").
	deadline := e.first.Add(w.cfg.DeliveryTimeout)
	if !e.dead && !now.Before(deadline) {
		w.deadLetter(e, expired(e.out.Topic, w.cfg.DeliveryTimeout, cmp.Or(e.lastErr, err)))
		return
	}
	e.attempts++
	backoff := min(retryBackoffMin<<min(e.attempts-1, 10), retryBackoffMax)
	e.at = now.Add(backoff)
	if !e.dead && e.at.After(deadline) {
		e.at = deadline // one last try
	}
	w.log.Log(context.Background(), slogLevel(e.dead), "produce_failed", "to", e.out.Topic, "source", source(e.src),
		"attempt", e.attempts, "retry_in", e.at.Sub(now), "err", err)
	w.count(Retried)
	w.hold(e)
}
