package client_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/kdelay/kdelay/client"
)

// clock is a time that tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(max int, ttl time.Duration) (*client.MemoryStore, *clock) {
		clk := &clock{now: time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)}
		s := client.NewMemoryStore(max, ttl)
		s.NowFunc = clk.Now
		return s, clk
	}
	seen := func(t *testing.T, s *client.MemoryStore, id string) bool {
		t.Helper()
		ok, err := s.Seen(ctx, id)
		if err != nil {
			t.Fatalf("Seen(%s): %v", id, err)
		}
		return ok
	}
	mark := func(t *testing.T, s *client.MemoryStore, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if err := s.Mark(ctx, id); err != nil {
				t.Fatalf("Mark(%s): %v", id, err)
			}
		}
	}

	t.Run("an id is seen once marked, and not before", func(t *testing.T) {
		s, _ := setup(10, time.Minute)
		if seen(t, s, "a") {
			t.Errorf("a seen before it was marked")
		}
		mark(t, s, "a")
		if !seen(t, s, "a") {
			t.Errorf("a not seen after it was marked")
		}
	})
	t.Run("an id is forgotten ttl after it was marked", func(t *testing.T) {
		s, clk := setup(10, time.Minute)
		mark(t, s, "a")
		clk.Add(30 * time.Second)
		mark(t, s, "b")
		clk.Add(30*time.Second - time.Nanosecond)
		if !seen(t, s, "a") {
			t.Errorf("a forgotten before its ttl")
		}
		clk.Add(time.Nanosecond)
		if seen(t, s, "a") {
			t.Errorf("a still seen at its ttl")
		}
		if !seen(t, s, "b") || s.Len() != 1 {
			t.Errorf("b seen %v, %d ids kept; want b kept alone", seen(t, s, "b"), s.Len())
		}
	})
	t.Run("marking again restarts the ttl", func(t *testing.T) {
		s, clk := setup(10, time.Minute)
		mark(t, s, "a", "b")
		clk.Add(50 * time.Second)
		mark(t, s, "a")
		clk.Add(50 * time.Second)
		if !seen(t, s, "a") || seen(t, s, "b") {
			t.Errorf("seen a %v, b %v; want a remarked and kept, b forgotten", seen(t, s, "a"), seen(t, s, "b"))
		}
	})
	t.Run("the oldest id is forgotten when full", func(t *testing.T) {
		s, clk := setup(3, time.Hour)
		for _, id := range []string{"a", "b", "c"} {
			mark(t, s, id)
			clk.Add(time.Second)
		}
		mark(t, s, "a") // a is now the newest
		mark(t, s, "d")
		for id, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
			if got := seen(t, s, id); got != want {
				t.Errorf("%s seen %v, want %v", id, got, want)
			}
		}
		if s.Len() != 3 {
			t.Errorf("%d ids kept, want 3", s.Len())
		}
	})
	t.Run("safe for concurrent use", func(t *testing.T) {
		s, clk := setup(50, time.Second)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				for j := range 200 {
					id := strconv.Itoa((i * j) % 80)
					if err := s.Mark(ctx, id); err != nil {
						t.Errorf("Mark: %v", err)
					}
					if _, err := s.Seen(ctx, id); err != nil {
						t.Errorf("Seen: %v", err)
					}
					clk.Add(time.Millisecond)
				}
			})
		}
		wg.Wait()
		if s.Len() > 50 {
			t.Errorf("%d ids kept, want at most 50", s.Len())
		}
	})
}

func BenchmarkMemoryStore(b *testing.B) {
	s := client.NewMemoryStore(10_000, time.Hour)
	ctx := context.Background()
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		id := ids[i%len(ids)]
		if ok, _ := s.Seen(ctx, id); !ok {
			_ = s.Mark(ctx, id)
		}
		i++
	}
}
