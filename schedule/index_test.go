package schedule

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// TestIndex: the index finds each schedule id it was given and no other,
// tells apart ids that share one of their two hashes, keeps every slot as
// it grows, and gives the queued slots soonest first.
func TestIndex(t *testing.T) {
	t.Parallel()
	t.Run("a slot is 56 bytes", func(t *testing.T) {
		// The bound in SCHEDULES.md (72 bytes an id) counts 56 of them here.
		if slotBytes != 56 {
			t.Errorf("a slot is %d bytes, want 56", slotBytes)
		}
	})
	t.Run("an id added is found, another is not", func(t *testing.T) {
		x := newIndex()
		a, added := x.add(x.key([]byte("daily-report")))
		if !added {
			t.Fatal("the first add of daily-report did not add a slot")
		}
		if got, ok := x.find(x.key([]byte("daily-report"))); !ok || got != a {
			t.Errorf("find daily-report: slot %d (%v), want %d", got, ok, a)
		}
		if again, added := x.add(x.key([]byte("daily-report"))); added || again != a {
			t.Errorf("a second add of daily-report gave slot %d (added %v), want %d, not added", again, added, a)
		}
		if got, ok := x.find(x.key([]byte("weekly-report"))); ok {
			t.Errorf("find weekly-report, never added: slot %d", got)
		}
		if x.len() != 1 {
			t.Errorf("%d ids, want 1", x.len())
		}
	})
	t.Run("a new slot has no record read and is not queued", func(t *testing.T) {
		x := newIndex()
		i, _ := x.add(x.key([]byte("new")))
		want := slot{hash: x.slot(i).hash, check: x.slot(i).check, version: -1, at: -1, doneVer: -1, pos: -1}
		if got := *x.slot(i); got != want {
			t.Errorf("new slot %+v, want %+v", got, want)
		}
		if h, ok := x.head(); ok {
			t.Errorf("the queue's head is slot %d, want an empty queue", h)
		}
	})
	for _, c := range []struct {
		name string
		a, b key
	}{
		{"ids sharing hash but not check are two", key{hash: 7, check: 1}, key{hash: 7, check: 2}},
		{"ids sharing check but not hash are two", key{hash: 7, check: 1}, key{hash: 8, check: 1}},
		{"ids in one bucket are two", key{hash: 7, check: 1}, key{hash: 7 + 1<<40, check: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := newIndex()
			a, _ := x.add(c.a)
			b, added := x.add(c.b)
			if !added || a == b {
				t.Fatalf("add %+v after %+v: slot %d (added %v), want a new slot beside %d", c.b, c.a, b, added, a)
			}
			for k, want := range map[key]int32{c.a: a, c.b: b} {
				if got, ok := x.find(k); !ok || got != want {
					t.Errorf("find %+v: slot %d (%v), want %d", k, got, ok, want)
				}
			}
		})
	}
	t.Run("grows and keeps every slot", func(t *testing.T) {
		x := newIndex()
		const n = 10_000 // past ten doublings, and pages
		for i := range n {
			s, _ := x.add(x.key(strconv.AppendInt(nil, int64(i), 10)))
			x.slot(s).version = int64(i)
		}
		for i := range n {
			s, ok := x.find(x.key(strconv.AppendInt(nil, int64(i), 10)))
			if !ok || x.slot(s).version != int64(i) {
				t.Fatalf("id %d after growing: slot %d (%v), version %d", i, s, ok, x.slot(s).version)
			}
		}
		if size := len(x.table); size&(size-1) != 0 || n > size/8*7 {
			t.Errorf("table of %d buckets for %d ids, want a power of two at most 7/8 full", size, n)
		}
		if _, ok := x.find(x.key([]byte("other"))); ok {
			t.Error("found an id never added")
		}
	})
	t.Run("the queue gives the soonest first, ties in the order added", func(t *testing.T) {
		x := newIndex()
		nexts := []uint32{30, 10, 20, 10, 0, 40}
		for i, next := range nexts {
			s, _ := x.add(key{hash: uint64(i)})
			x.slot(s).next = next
			x.fix(s)
		}
		if got, want := drain(x), []int32{1, 3, 2, 0, 5}; !slices.Equal(got, want) {
			t.Errorf("slots with next %v came out as %v, want %v: the one with next 0 not at all", nexts, got, want)
		}
	})
	t.Run("next 0 takes a slot out of the queue", func(t *testing.T) {
		x := newIndex()
		for i, next := range []uint32{10, 20, 30} {
			s, _ := x.add(key{hash: uint64(i)})
			x.slot(s).next = next
			x.fix(s)
		}
		x.slot(1).next = 0 // its count reached, say
		x.fix(1)
		if x.slot(1).pos != -1 {
			t.Errorf("slot 1 with next 0 is at %d in the queue, want -1", x.slot(1).pos)
		}
		x.fix(1) // again: still out
		if got, want := drain(x), []int32{0, 2}; !slices.Equal(got, want) {
			t.Errorf("queue gave %v, want %v", got, want)
		}
	})
	t.Run("the queue stays in order as nexts move", func(t *testing.T) {
		x := newIndex()
		r := rand.New(rand.NewPCG(1, 2))
		const n = 2000
		for i := range n {
			s, _ := x.add(key{hash: uint64(i)})
			x.slot(s).next = r.Uint32N(100) // some 0: not queued
			x.fix(s)
		}
		for range 5 * n {
			s := int32(r.IntN(n))
			x.slot(s).next = r.Uint32N(100)
			x.fix(s)
		}
		var want []int32
		for i := range int32(n) {
			if x.slot(i).next != 0 {
				want = append(want, i)
			}
		}
		slices.SortStableFunc(want, func(a, b int32) int { return int(x.slot(a).next) - int(x.slot(b).next) })
		if got := drain(x); !slices.Equal(got, want) {
			t.Errorf("after moving nexts the queue gave %d slots, %v..., want %d, %v...", len(got), got[:min(10, len(got))], len(want), want[:min(10, len(want))])
		}
	})
}

// drain takes the queue's head until it is empty, as writing does (its
// next goes to 0: a schedule with no occurrence left), and returns the
// slots in the order they came.
func drain(x *index) []int32 {
	var got []int32
	for h, ok := x.head(); ok; h, ok = x.head() {
		got = append(got, h)
		x.slot(h).next = 0
		x.fix(h)
	}
	return got
}

// maxIndexBytes is what the index may hold for each schedule id: the bound
// SCHEDULES.md states for a process's scheduler.
const maxIndexBytes = boundBytes

// TestIndexMemory: a million schedule ids, each queued, cost at most 72
// bytes of live heap each, and bytes, which kdelay_schedule_index_bytes
// reports, says what they cost.
//
// Not parallel: the heap is the process's, and a test running beside this
// one would count in it.
func TestIndexMemory(t *testing.T) {
	const n = 1_000_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	x := newIndex()
	id := make([]byte, 0, 32)
	for i := range n {
		id = strconv.AppendInt(append(id[:0], "schedule-"...), int64(i), 10)
		s, _ := x.add(x.key(id))
		x.slot(s).next = uint32(i%86400 + 1) // daily schedules, all queued
		x.fix(s)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	per := float64(live) / n
	t.Logf("%d ids: %.1f bytes of live heap each, bytes() %.1f each", n, per, float64(x.bytes())/n)
	if per > maxIndexBytes {
		t.Errorf("an id costs %.1f bytes of live heap, more than %d: a million would cost %.0f MB", per, maxIndexBytes, per)
	}
	// Within 2%: the heap also holds what the runtime and the test do.
	if b := x.bytes(); float64(b) < 0.98*float64(live) || float64(b) > 1.02*float64(live) {
		t.Errorf("bytes() says %d, the live heap grew by %d: want them within 2%%", b, live)
	}
	runtime.KeepAlive(x)
}

// BenchmarkIndex: what the scheduler does to the index for each record it
// reads (find or add the id, set its version and next) and each occurrence
// it writes (take the queue's head, move its next a day on), among 100,000
// schedule ids.
func BenchmarkIndex(b *testing.B) {
	const n = 100_000
	x := newIndex()
	ids := make([][]byte, n)
	for i := range ids {
		ids[i] = []byte("schedule-" + strconv.Itoa(i))
		s, _ := x.add(x.key(ids[i]))
		x.slot(s).next = uint32(i%86400 + 1)
		x.fix(s)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s, _ := x.add(x.key(ids[i%n]))
		x.slot(s).version++
		x.slot(s).next += 3600
		x.fix(s)
		h, _ := x.head()
		x.slot(h).next += 86400
		x.fix(h)
		i++
	}
}
