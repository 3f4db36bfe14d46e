package forwarder

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// TestPoolLending checks how forwarders share MaxBufferedBytes: each may
// always fill its reserve; beyond it, only one whose records are all on
// their way out borrows, and only what the pool has; what is acknowledged
// or dropped goes back; and the bytes held at once never exceed the
// reserves plus the pool, beyond the fetch that found a buffer full.
func TestPoolLending(t *testing.T) {
	t.Parallel()
	const reserve, fetch int64 = 100, 30
	setup := func() (*bufferPool, *buffer, *buffer) {
		p := &bufferPool{limit: 200}
		return p, &buffer{limit: reserve, pool: p}, &buffer{limit: reserve, pool: p}
	}
	fill := func(b *buffer, borrow bool) { fillBuffer(b, fetch, borrow) }

	t.Run("records all due borrow the pool", func(t *testing.T) {
		t.Parallel()
		p, a, _ := setup()
		fill(a, true)
		if a.bytes <= reserve || p.lent.Load() != a.bytes-reserve {
			t.Fatalf("holds %d, pool lent %d; want beyond its reserve %d, the excess lent", a.bytes, p.lent.Load(), reserve)
		}
		if most := reserve + p.limit + fetch; a.bytes > most {
			t.Errorf("holds %d, want at most reserve + pool + one fetch = %d", a.bytes, most)
		}
	})
	t.Run("records that wait borrow nothing", func(t *testing.T) {
		t.Parallel()
		p, a, _ := setup()
		fill(a, false)
		if a.bytes > reserve+fetch || p.lent.Load() != a.bytes-reserve {
			t.Errorf("holds %d, pool lent %d; want its reserve %d plus at most one fetch", a.bytes, p.lent.Load(), reserve)
		}
	})
	t.Run("a reserve stays free while another borrows the pool", func(t *testing.T) {
		t.Parallel()
		p, a, b := setup()
		fill(a, true)
		fill(b, true)
		if b.bytes < reserve || b.bytes > reserve+fetch {
			t.Errorf("the second holds %d with the pool lent out, want its reserve %d plus at most one fetch", b.bytes, reserve)
		}
		if peak, most := p.peak.Load(), 2*reserve+p.limit+2*fetch; peak > most {
			t.Errorf("held %d at once, want at most reserves + pool + one fetch each = %d", peak, most)
		}
	})
	t.Run("acknowledged bytes go back and resume the borrower once the pool has room for a fetch", func(t *testing.T) {
		t.Parallel()
		p, a, _ := setup()
		fill(a, true)
		wake := a.wakeAfter(true)
		a.release(wake - 1)
		if a.update(true); !a.full {
			t.Fatalf("resumed with %d bytes acknowledged, before the %d it asked to be woken at", wake-1, wake)
		}
		a.release(1)
		if a.update(true); a.full {
			t.Fatalf("still full with the pool lent %d of %d, want resumed with room for a fetch of %d", p.lent.Load(), p.limit, fetch)
		}
		if lent := p.lent.Load(); lent <= p.limit/2 {
			t.Errorf("resumed only once the pool was lent %d of %d: a borrower holding records due within the smallest level waits for half of them to be handed on", lent, p.limit)
		}
		a.release(a.bytes)
		a.update(true)
		if p.lent.Load() != 0 || p.held.Load() != 0 {
			t.Errorf("holds nothing, yet the pool counts %d held, %d lent; want 0", p.held.Load(), p.lent.Load())
		}
	})
	t.Run("a stopped forwarder gives back what it held", func(t *testing.T) {
		t.Parallel()
		p, a, b := setup()
		fill(a, true)
		a.detach()
		if p.lent.Load() != 0 || p.held.Load() != 0 {
			t.Fatalf("after detach the pool counts %d held, %d lent; want 0", p.held.Load(), p.lent.Load())
		}
		fill(b, true)
		if b.bytes <= reserve {
			t.Errorf("the other holds %d, want it to borrow what the stopped one gave back", b.bytes)
		}
	})
	t.Run("outside a Forwarder nothing is lent", func(t *testing.T) {
		t.Parallel()
		a := &buffer{limit: reserve}
		fill(a, true)
		if a.bytes > reserve+fetch {
			t.Errorf("holds %d without a pool, want its limit %d plus at most one fetch", a.bytes, reserve)
		}
	})
}

// TestPoolLendsUnusedReserves checks what forwarders that borrow get beside
// idle ones: half of the reserves the idle ones leave unused, on top of the
// pool, while none borrows more than the pool's quarter; and the bytes held
// at once stay within the whole budget (the reserves, the quarter and half
// the reserves again: MaxBufferedBytes), beyond the fetch that found each
// buffer full, even once every idle forwarder fills its reserve.
func TestPoolLendsUnusedReserves(t *testing.T) {
	t.Parallel()
	const (
		reserve, fetch int64 = 100, 30
		stages               = 8 // two busy, six idle
		budget               = 4 * stages * reserve / 2
	)
	setup := func() (*bufferPool, []*buffer) {
		p := &bufferPool{limit: budget / 4}
		bs := make([]*buffer, stages)
		for i := range bs {
			bs[i] = &buffer{limit: reserve, pool: p}
			bs[i].join()
		}
		return p, bs
	}
	fill := func(b *buffer, borrow bool) { fillBuffer(b, fetch, borrow) }

	t.Run("busy forwarders borrow what idle ones leave", func(t *testing.T) {
		t.Parallel()
		p, bs := setup()
		fill(bs[0], true)
		fill(bs[1], true)
		if lent := p.lent.Load(); lent <= p.limit+fetch {
			t.Errorf("two busy forwarders beside six idle borrowed %d, want more than the quarter %d plus a fetch: half the idle reserves are theirs too", lent, p.limit)
		}
		for i, b := range bs[:2] {
			if b.lent > p.limit+fetch {
				t.Errorf("forwarder %d borrowed %d, want at most the quarter %d plus one fetch", i, b.lent, p.limit)
			}
		}
	})
	t.Run("idle forwarders filling their reserves keep the total within the budget", func(t *testing.T) {
		t.Parallel()
		p, bs := setup()
		fill(bs[0], true)
		fill(bs[1], true)
		for _, b := range bs[2:] {
			fill(b, false)
			if b.bytes < reserve {
				t.Errorf("an idle forwarder woke and holds %d with the pool lent out, want its reserve %d", b.bytes, reserve)
			}
		}
		if peak, most := p.peak.Load(), budget+stages*fetch; peak > most {
			t.Errorf("held %d at once, want at most the budget %d plus one fetch each: %d", peak, budget, most)
		}
		// Once the borrowers have handed on what they held, they borrow
		// again only what is left: the quarter.
		for _, b := range bs[:2] {
			b.release(b.bytes)
			b.update(true)
		}
		fill(bs[0], true)
		fill(bs[1], true)
		if lent, most := p.lent.Load(), p.limit+stages*fetch; lent > most {
			t.Errorf("lent %d with every reserve in use, want at most the quarter %d plus a fetch each", lent, p.limit)
		}
	})
	t.Run("a stopped forwarder's reserve is no longer lent", func(t *testing.T) {
		t.Parallel()
		p, bs := setup()
		before := p.lendable()
		bs[7].detach()
		if got, want := p.lendable(), before-reserve/2; got != want {
			t.Errorf("lendable %d after an idle forwarder stopped, want %d: half its reserve less", got, want)
		}
	})
}

// TestPoolSharesTheBudget checks that MaxBufferedBytes covers what the
// process holds beside the records (Config.SharedBytes: the scheduler's
// index): the reserves and the quarter shrink in proportion, so records and
// index together stay within the budget beyond a fetch a forwarder, as the
// index grows under records already held too; and records keep their least
// share however large the index.
func TestPoolSharesTheBudget(t *testing.T) {
	t.Parallel()
	const (
		reserve, fetch int64 = 100, 30
		stages               = 8
		budget               = 4 * stages * reserve / 2
		least                = stages * 20
	)
	setup := func(shared *atomic.Int64) (*bufferPool, []*buffer) {
		p := &bufferPool{limit: budget / 4, budget: budget, least: least, shared: shared.Load}
		bs := make([]*buffer, stages)
		for i := range bs {
			bs[i] = &buffer{limit: reserve, whole: reserve, pool: p}
			bs[i].join()
		}
		return p, bs
	}
	fill := func(b *buffer, borrow bool) { fillBuffer(b, fetch, borrow) }
	// fillAll fills two forwarders that borrow, then every other one's
	// reserve: the most the pool lets them hold at once.
	fillAll := func(bs []*buffer) {
		fill(bs[0], true)
		fill(bs[1], true)
		for _, b := range bs[2:] {
			fill(b, false)
		}
	}

	for _, index := range []int64{0, budget / 4, budget / 2, 3 * budget / 4} {
		t.Run(fmt.Sprintf("records and an index of %d stay within the budget", index), func(t *testing.T) {
			t.Parallel()
			var shared atomic.Int64
			shared.Store(index)
			p, bs := setup(&shared)
			fillAll(bs)
			if peak, most := p.peak.Load(), budget-index+stages*fetch; peak > most {
				t.Errorf("records held %d at once beside an index of %d, want at most the budget %d less the index, plus a fetch each: %d",
					peak, index, budget, most)
			}
			if want := reserve * (budget - index) / budget; bs[5].limit != want {
				t.Errorf("a reserve is %d beside an index of %d, want %d", bs[5].limit, index, want)
			}
			if index == 0 && p.lent.Load() <= p.limit {
				t.Errorf("with no index the busy ones borrowed %d, want more than the quarter %d, as before", p.lent.Load(), p.limit)
			}
		})
	}
	t.Run("an index that grows under records held shrinks what is lent", func(t *testing.T) {
		t.Parallel()
		var shared atomic.Int64
		p, bs := setup(&shared)
		fillAll(bs)
		shared.Store(budget / 2)
		for _, b := range bs {
			b.release(b.bytes / 2)
			b.update(b == bs[0] || b == bs[1])
		}
		for _, b := range bs {
			if !b.full && b.bytes >= b.limit && b.lent > 0 {
				t.Errorf("a forwarder holds %d, %d of it lent, past its reserve %d and not full", b.bytes, b.lent, b.limit)
			}
		}
		var reserves int64
		for _, b := range bs {
			reserves += b.limit
		}
		if got := p.reserves.Load(); got != reserves {
			t.Errorf("the pool counts %d of reserves, want the reserves as they shrank: %d", got, reserves)
		}
		for _, b := range bs {
			b.release(b.bytes)
			b.update(true)
		}
		fillAll(bs)
		if lent, most := p.lent.Load(), p.quarter()+(p.reserves.Load())/2+stages*fetch; lent > most {
			t.Errorf("lent %d once refilled beside the grown index, want at most the shrunk quarter and half the shrunk reserves plus a fetch each: %d", lent, most)
		}
		if peak := p.held.Load(); peak > budget/2+stages*fetch {
			t.Errorf("records hold %d once refilled beside an index of half the budget, want at most %d plus a fetch each", peak, budget/2)
		}
	})
	t.Run("a budget of gibibytes scales without overflow", func(t *testing.T) {
		t.Parallel()
		const big = int64(16) << 30 // n × records passes int64
		p := &bufferPool{limit: big / 4, budget: big, least: least, shared: func() int64 { return big / 2 }}
		if got, want := p.quarter(), big/8; got != want {
			t.Errorf("the quarter of %d beside an index of half of it is %d, want %d", big, got, want)
		}
	})
	t.Run("records keep their least share beside an index past the budget", func(t *testing.T) {
		t.Parallel()
		var shared atomic.Int64
		shared.Store(2 * budget)
		p, bs := setup(&shared)
		fillAll(bs)
		if want := reserve * least / budget; bs[3].limit != want || bs[3].bytes < want {
			t.Errorf("a reserve is %d, holding %d, beside an index twice the budget, want %d: the least share's", bs[3].limit, bs[3].bytes, want)
		}
		if held, most := p.held.Load(), least+stages*fetch; held > most {
			t.Errorf("records hold %d, want at most the least share %d plus a fetch each", held, least)
		}
	})
}

// fillBuffer fetches fetch bytes at a time into b until it is full, as the
// loop does: a fetch arrives only while it is not.
func fillBuffer(b *buffer, fetch int64, borrow bool) {
	for i := 0; i < 100 && !b.full; i++ {
		b.add(fetch)
		b.fetch = fetch
		b.update(borrow)
	}
}
