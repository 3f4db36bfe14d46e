package forwarder

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkHeldQueue pushes and pops records held in memory as a level of
// 1s does at 10,000 records/s: about 10,000 held at once, each push due
// within the next second, the earliest popped. A profile of kdelay serve at
// that rate spent 8% of its CPU comparing held records' times.
func BenchmarkHeldQueue(b *testing.B) {
	const held = 10_000
	base := time.Now()
	rng := rand.New(rand.NewPCG(1, 2))
	entries := make([]*entry, 4*held) // more than are held: pushed again in turn
	for i := range entries {
		entries[i] = &entry{at: base.Add(time.Duration(rng.Int64N(int64(time.Second))))}
	}
	var q heldQueue
	for _, e := range entries[:held] {
		q.push(e)
	}
	i := held
	b.ReportAllocs()
	for b.Loop() {
		e := q.pop()
		next := entries[i%len(entries)]
		next.at = e.at.Add(time.Duration(rng.Int64N(int64(time.Second))))
		q.push(next)
		i++
	}
}

// TestHeldQueueOrder: records leave the queue earliest first, equal times
// included, and again after their times changed in place (a command in
// force, reorder).
func TestHeldQueueOrder(t *testing.T) {
	t.Parallel()
	base := time.Now()
	rng := rand.New(rand.NewPCG(3, 4))
	var q heldQueue
	var all []*entry
	for range 1000 {
		e := &entry{at: base.Add(time.Duration(rng.Int64N(100)) * time.Millisecond)}
		all = append(all, e)
		q.push(e)
	}
	drain := func() {
		t.Helper()
		var last time.Time
		for n := 0; len(q) > 0; n++ {
			e := q.pop()
			if e.at.Before(last) {
				t.Fatalf("pop %d: %v after %v", n, e.at, last)
			}
			last = e.at
		}
	}
	for range 500 { // interleaved: half popped, then pushed back later
		e := q.pop()
		e.at = e.at.Add(time.Duration(rng.Int64N(100)) * time.Millisecond)
		q.push(e)
	}
	drain()
	for _, e := range all {
		q.push(e)
	}
	for _, e := range all[:300] {
		e.at = base.Add(-time.Duration(rng.Int64N(100)) * time.Millisecond)
	}
	q.reorder()
	if got := q.top(); got.at.After(base) {
		t.Errorf("after reorder the top is due %v, want one of the records moved before %v", got.at, base)
	}
	drain()
}
