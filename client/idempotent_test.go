package client_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
)

func record(id string) *kgo.Record {
	r := &kgo.Record{Value: []byte("v")}
	if id != "" {
		r.Headers = []kgo.RecordHeader{{Key: kdelay.HeaderID, Value: []byte(id)}}
	}
	return r
}

// counter is a handler that counts its calls by id and fails while fail says so.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	fail  func(id string, call int) error
}

func (c *counter) handle(_ context.Context, r *kgo.Record) error {
	id, _ := client.ID(r)
	c.mu.Lock()
	c.calls[id]++
	n := c.calls[id]
	c.mu.Unlock()
	if c.fail != nil {
		return c.fail(id, n)
	}
	return nil
}

func (c *counter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

func TestIdempotent(t *testing.T) {
	t.Parallel()
	setup := func(fail func(string, int) error) (*counter, func(context.Context, *kgo.Record) error) {
		c := &counter{calls: map[string]int{}, fail: fail}
		return c, client.Idempotent(client.NewMemoryStore(100, time.Hour), c.handle)
	}
	ctx := context.Background()

	t.Run("a duplicate is skipped", func(t *testing.T) {
		c, handle := setup(nil)
		for range 3 {
			if err := handle(ctx, record("a")); err != nil {
				t.Fatalf("handle: %v", err)
			}
		}
		if n := c.count("a"); n != 1 {
			t.Errorf("handler ran %d times for one id, want 1", n)
		}
	})
	t.Run("a failed record is handled again", func(t *testing.T) {
		boom := errors.New("boom")
		c, handle := setup(func(_ string, call int) error {
			if call == 1 {
				return boom
			}
			return nil
		})
		if err := handle(ctx, record("a")); !errors.Is(err, boom) {
			t.Fatalf("first handle: %v, want the handler's error", err)
		}
		for range 2 {
			if err := handle(ctx, record("a")); err != nil {
				t.Fatalf("handle: %v", err)
			}
		}
		if n := c.count("a"); n != 2 {
			t.Errorf("handler ran %d times, want 2: once failing, once succeeding", n)
		}
	})
	t.Run("a record without kdelay-id is handled every time", func(t *testing.T) {
		c, handle := setup(nil)
		for range 3 {
			if err := handle(ctx, record("")); err != nil {
				t.Fatalf("handle: %v", err)
			}
		}
		if n := c.count(""); n != 3 {
			t.Errorf("handler ran %d times, want 3", n)
		}
	})
	t.Run("concurrent duplicates run once", func(t *testing.T) {
		c, handle := setup(nil)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if err := handle(ctx, record("a")); err != nil {
					t.Errorf("handle: %v", err)
				}
			})
		}
		wg.Wait()
		if n := c.count("a"); n != 1 {
			t.Errorf("handler ran %d times for 50 concurrent copies, want 1", n)
		}
	})
	t.Run("a concurrent duplicate runs when the first fails", func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		c, handle := setup(func(_ string, call int) error {
			if call == 1 {
				close(started)
				<-release
				return errors.New("boom")
			}
			return nil
		})
		first := make(chan error, 1)
		go func() { first <- handle(ctx, record("a")) }()
		<-started
		second := make(chan error, 1)
		go func() { second <- handle(ctx, record("a")) }()
		close(release)
		if err := <-first; err == nil {
			t.Errorf("first handle: nil, want its error")
		}
		if err := <-second; err != nil {
			t.Errorf("second handle: %v, want nil", err)
		}
		if n := c.count("a"); n != 2 {
			t.Errorf("handler ran %d times, want 2", n)
		}
	})
	t.Run("waiting for a concurrent duplicate ends with ctx", func(t *testing.T) {
		started, release := make(chan struct{}), make(chan struct{})
		defer close(release)
		_, handle := setup(func(string, int) error {
			close(started)
			<-release
			return nil
		})
		go func() { _ = handle(ctx, record("a")) }()
		<-started
		wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		if err := handle(wctx, record("a")); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("handle: %v, want the context's deadline", err)
		}
	})
}

// failingStore fails Seen or Mark.
type failingStore struct{ seen, mark error }

func (s failingStore) Seen(context.Context, string) (bool, error) { return false, s.seen }
func (s failingStore) Mark(context.Context, string) error         { return s.mark }

func TestIdempotentStoreFails(t *testing.T) {
	t.Parallel()
	down := errors.New("store down")
	t.Run("a failed lookup does not run the handler", func(t *testing.T) {
		c := &counter{calls: map[string]int{}}
		err := client.Idempotent(failingStore{seen: down}, c.handle)(context.Background(), record("a"))
		if !errors.Is(err, down) || c.count("a") != 0 {
			t.Errorf("handle: %v after %d calls, want the store's error and no call", err, c.count("a"))
		}
	})
	t.Run("a failed mark is ErrNotMarked", func(t *testing.T) {
		c := &counter{calls: map[string]int{}}
		err := client.Idempotent(failingStore{mark: down}, c.handle)(context.Background(), record("a"))
		if !errors.Is(err, client.ErrNotMarked) || !errors.Is(err, down) || c.count("a") != 1 {
			t.Errorf("handle: %v after %d calls, want ErrNotMarked wrapping the store's error after one call", err, c.count("a"))
		}
	})
}

func TestIdempotentSharedStoreUnderLoad(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	handle := client.Idempotent(client.NewMemoryStore(1000, time.Hour), func(context.Context, *kgo.Record) error {
		calls.Add(1)
		return nil
	})
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for j := range 100 {
				if err := handle(context.Background(), record(ids[(i+j)%len(ids)])); err != nil {
					t.Errorf("handle: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != int64(len(ids)) {
		t.Errorf("handler ran %d times for %d ids, want once each", n, len(ids))
	}
}
