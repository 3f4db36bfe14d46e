package forwarder

import (
	"container/heap"
	"time"
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

// hold keeps e in memory until e.at.
func (w *worker) hold(e *entry) {
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
