package forwarder

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLeavingIsNotHandedOn checks what marking a partition leaving keeps the
// loop from doing while a rebalance callback takes the partition away: its
// due head is not taken, its due held record is not released (the callback's
// drain releases it), no background commit of it starts, and the record kept
// does not make the loop wake at once, again and again. A partition not
// leaving has its head taken by the same cycle. The worker's client points
// at a closed port: what it produces stays in the client's buffer.
func TestLeavingIsNotHandedOn(t *testing.T) {
	t.Parallel()
	now := time.Now()
	setup := func(t *testing.T) (*worker, *partition, *entry) {
		w, _ := pollSetup(t)
		p := w.partition(0, 0)
		p.enqueue([]*kgo.Record{{Offset: 0, Timestamp: now.Add(-2 * time.Hour)}}) // due an hour ago
		p.take()                                                                  // the record held, below
		p.enqueue([]*kgo.Record{{Offset: 1, Timestamp: now.Add(-2 * time.Hour)}}) // the head, due
		e := p.window[0]
		e.out, e.at = &kgo.Record{Topic: w.source}, now.Add(-time.Second)
		w.hold(e)
		return w, p, e
	}

	t.Run("leaving", func(t *testing.T) {
		t.Parallel()
		w, p, e := setup(t)
		w.markLeaving([]int32{0})
		p.notDue = true // as a pause before the callback left it, now stale
		wake := w.cycle(now)
		if len(p.queue) != 1 {
			t.Errorf("a cycle took the head of a partition leaving: %d queued, want 1", len(p.queue))
		}
		if len(w.held) != 1 || p.flying != 0 {
			t.Errorf("a cycle released a held record of a partition leaving: %d held, %d in flight, want 1 and 0", len(w.held), p.flying)
		}
		if w.commits.inFlight {
			t.Error("a cycle began a background commit of a partition leaving, want its callback alone to commit it")
		}
		if !wake.IsZero() && !wake.After(now) {
			t.Errorf("with only a partition leaving the loop wakes again in %s, want later or only when woken", wake.Sub(now))
		}
		// The callback's drain releases it.
		w.mu.Lock()
		w.releaseHeld(now, true)
		w.mu.Unlock()
		if len(w.held) != 0 || p.flying != 1 || e.part != p {
			t.Errorf("the callback's drain left %d held, %d in flight, want 0 and 1", len(w.held), p.flying)
		}
	})

	t.Run("owned", func(t *testing.T) {
		t.Parallel()
		w, p, _ := setup(t)
		w.commits.last = now // no background commit: the client has no broker
		w.cycle(now)
		if len(p.queue) != 0 || len(w.held) != 0 {
			t.Errorf("a cycle left %d queued and %d held of a partition it owns, want both handed on", len(p.queue), len(w.held))
		}
	})
}
