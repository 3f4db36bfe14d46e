package forwarder

import (
	"container/heap"
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
type heldQueue []*entry

func (q heldQueue) Len() int           { return len(q) }
func (q heldQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q heldQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *heldQueue) Push(x any)        { *q = append(*q, x.(*entry)) }
func (q *heldQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// hold keeps e in memory until e.at, in memory of its own (own).
func (w *worker) hold(e *entry) {
	e.own()
	e.part.waiting++
	heap.Push(&w.held, e)
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
		e := w.held[0]
		if !e.part.gone && e.at.After(check) {
			break
		}
		heap.Pop(&w.held)
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
		soonest = w.held[0].at
	}
	for _, e := range kept {
		heap.Push(&w.held, e)
	}
	return soonest
}

// forgetHeld stops counting the records p holds for a retry: p is gone, and
// its records leave the queue when they reach its top.
func (w *worker) forgetHeld(p *partition) {
	for _, e := range w.held {
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
// shares the copy of whatever it took from src.
func (e *entry) own() {
	src := owned(e.src, nil, nil)
	if e.out != nil {
		e.out = owned(e.out, e.src, src)
	}
	e.src = src
}

// owned copies r with its key, value and header values in one new buffer.
// A slice that is one of was's becomes the same one of is's, is being
// owned(was): it is not copied twice.
func owned(r, was, is *kgo.Record) *kgo.Record {
	c := *r
	c.Headers = slices.Clone(r.Headers)
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Value)
	}
	buf := make([]byte, 0, n)
	own := func(b []byte) []byte {
		switch {
		case b == nil:
			return nil // null stays null, empty stays empty
		case len(b) == 0:
			return []byte{}
		}
		if was != nil {
			if v, ok := copiedAs(b, was, is); ok {
				return v
			}
		}
		buf = append(buf, b...)
		return buf[len(buf)-len(b) : len(buf) : len(buf)]
	}
	c.Key, c.Value = own(r.Key), own(r.Value)
	for i := range c.Headers {
		c.Headers[i].Value = own(c.Headers[i].Value)
	}
	return &c
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
