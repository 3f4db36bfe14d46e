package forwarder

import (
	"iter"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// heldQueue is the records a worker holds in memory until a time, a heap by
// that time (entry.at): remainders below the smallest level, and records
// waiting to retry a failed produce. A cycle pops what is due and looks at
// the top for when to wake, rather than looking at every record held: at
// 10,000 records/s a level of 1s holds thousands of remainders, and the
// scan took a third of kdelay serve's CPU.
//
// Each slot keeps its record's time beside the pointer, so that the heap's
// comparisons read one contiguous slice rather than load every record
// compared: time.Time.Before on the records took 8% of kdelay serve's CPU
// at 10,000 records/s (BenchmarkHeldQueue: ~700 ns a push and pop with
// 10,000 held, before).
type heldQueue []heldSlot

type heldSlot struct {
	at int64 // e.at in Unix nanoseconds
	e  *entry
}

// push holds e until e.at.
func (q *heldQueue) push(e *entry) {
	*q = append(*q, heldSlot{heldKey(e.at), e})
	q.up(len(*q) - 1)
}

// pop takes the earliest held record.
func (q *heldQueue) pop() *entry {
	h := *q
	n := len(h) - 1
	e := h[0].e
	h[0] = h[n]
	h[n] = heldSlot{} // the record is not kept alive by the slice
	*q = h[:n]
	q.down(0)
	return e
}

// heldKey is t in Unix nanoseconds, the zero time first (UnixNano leaves
// it undefined).
func heldKey(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

// top is the earliest held record; the queue must not be empty.
func (q heldQueue) top() *entry { return q[0].e }

// all yields every held record, in no order.
func (q heldQueue) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		for _, h := range q {
			if !yield(h.e) {
				return
			}
		}
	}
}

// take removes and returns the held records f is true for, in no order.
func (q *heldQueue) take(f func(*entry) bool) []*entry {
	var taken []*entry
	kept := (*q)[:0]
	for _, h := range *q {
		if f(h.e) {
			taken = append(taken, h.e)
		} else {
			kept = append(kept, h)
		}
	}
	clear((*q)[len(kept):]) // the records taken are not kept alive by the slice
	*q = kept
	if len(taken) > 0 {
		q.reorder()
	}
	return taken
}

// reorder restores the heap after records' times changed in place.
func (q heldQueue) reorder() {
	for i := range q {
		q[i].at = heldKey(q[i].e.at)
	}
	for i := len(q)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q heldQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if q[parent].at <= q[i].at {
			return
		}
		q[parent], q[i] = q[i], q[parent]
		i = parent
	}
}

func (q heldQueue) down(i int) {
	for {
		least, l := i, 2*i+1
		if l < len(q) && q[l].at < q[least].at {
			least = l
		}
		if r := l + 1; r < len(q) && q[r].at < q[least].at {
			least = r
		}
		if least == i {
			return
		}
		q[i], q[least] = q[least], q[i]
		i = least
	}
}

// hold keeps e in memory until e.at, in memory of its own (own).
func (w *worker) hold(e *entry) {
	e.own()
	e.part.waiting++
	w.held.push(e)
	if e.attempts > 0 {
		w.heldRetry += e.size
	}
}

// releaseHeld produces held records due by check and returns when the
// earliest remaining one is due (the zero time if none). Records of a
// partition gone are dropped as they reach the top: forgetHeld has
// released what they counted. Records of a partition leaving are kept
// unless leaving is set (the callback that takes it away releases them),
// and do not count in soonest once due: the callback wakes the loop when
// it is done.
func (w *worker) releaseHeld(check time.Time, leaving bool) (soonest time.Time) {
	var again []*entry // held records a command changed: routed again
	var kept []*entry  // due, of a partition leaving
	for len(w.held) > 0 {
		e := w.held.top()
		if !e.part.gone && e.at.After(check) {
			break
		}
		w.held.pop()
		if e.part.gone {
			continue
		}
		if e.part.leaving && !leaving {
			kept = append(kept, e)
			continue
		}
		e.part.waiting--
		if e.attempts > 0 {
			w.heldRetry -= e.size
		}
		if w.obeyHeld(e) {
			w.produce(e)
		} else {
			again = append(again, e)
		}
	}
	// After the loop: routing may hold them again.
	for _, e := range again {
		w.route(e, check, check)
	}
	if len(w.held) > 0 {
		soonest = w.held.top().at
	}
	for _, e := range kept {
		w.held.push(e)
	}
	return soonest
}

// forgetHeld stops counting the records p holds for a retry: p is gone, and
// its records leave the queue when they reach its top.
func (w *worker) forgetHeld(p *partition) {
	for e := range w.held.all() {
		if e.part == p && e.attempts > 0 {
			w.heldRetry -= e.size
		}
	}
}

// own gives e's records bytes of their own, so that holding e keeps only
// them. The client decodes a fetch into one slab of kgo.Records whose keys,
// values and header values are slices of one buffer (a decompressed batch,
// or the fetch response itself): a record held by pointer for up to the
// smallest level kept its whole slab and buffer, while the worker's buffer
// counted only the record (TestHeldRecordsLetTheirFetchGo). Every record
// passes through a level as a remainder, so at 20,000 records/s the live
// heap of kdelay serve was three times what the buffers counted, and the
// collector ran without end (docs/BENCHMARKS.md, "Sustained rate"). out
// shares the copy of whatever it took from src, and is rewritten in place:
// a held record is not in flight, and its record is the entry's own
// allocation more often than not (entry.next).
func (e *entry) own() {
	src := owned(e.src)
	if e.out != nil {
		ownIn(e.out, e.src, src)
	}
	if e.out != &e.rec {
		e.rec = kgo.Record{} // the record out replaced (a dead letter, a retry): it must keep no slice of the slab
	}
	e.src = src
}

// owned copies r with its key, value and header values in one new buffer.
func owned(r *kgo.Record) *kgo.Record {
	c := *r
	c.Headers = slices.Clone(r.Headers)
	ownIn(&c, nil, nil)
	return &c
}

// ownIn copies r's key, value and header values into one new buffer, in
// place; r's headers must be a slice of its own. A slice that is one of
// was's becomes the same one of is's, is being owned(was): it is not
// copied twice.
func ownIn(r, was, is *kgo.Record) {
	shared := func(b []byte) ([]byte, bool) {
		if was == nil || len(b) == 0 {
			return nil, false
		}
		return copiedAs(b, was, is)
	}
	n := 0
	for b := range byteSlices(r) {
		if _, ok := shared(*b); !ok {
			n += len(*b)
		}
	}
	buf := make([]byte, 0, n)
	for b := range byteSlices(r) {
		switch v, ok := shared(*b); {
		case ok:
			*b = v
		case *b == nil:
			// null stays null
		case len(*b) == 0:
			*b = []byte{} // empty stays empty
		default:
			buf = append(buf, *b...)
			*b = buf[len(buf)-len(*b) : len(buf) : len(buf)]
		}
	}
}

// byteSlices yields r's key, value and header values, to read or replace.
func byteSlices(r *kgo.Record) iter.Seq[*[]byte] {
	return func(yield func(*[]byte) bool) {
		if !yield(&r.Key) || !yield(&r.Value) {
			return
		}
		for i := range r.Headers {
			if !yield(&r.Headers[i].Value) {
				return
			}
		}
	}
}

// copiedAs returns the slice of is that copies b, if b is one of was's.
func copiedAs(b []byte, was, is *kgo.Record) ([]byte, bool) {
	same := func(x []byte) bool { return len(x) == len(b) && &x[0] == &b[0] }
	switch {
	case same(was.Key):
		return is.Key, true
	case same(was.Value):
		return is.Value, true
	}
	for i, h := range was.Headers {
		if same(h.Value) {
			return is.Headers[i].Value, true
		}
	}
	return nil, false
}
