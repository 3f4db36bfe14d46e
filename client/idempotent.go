package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// Store remembers the kdelay-ids of records that were handled. Delivery is
// at-least-once, so a consumer can see a record twice: after kdelay restarts
// between producing it and committing, or after the consumer itself restarts.
// An implementation backed by a database or Redis dedupes across consumers;
// MemoryStore dedupes within one process.
type Store interface {
	// Seen reports whether id was marked and is still remembered.
	Seen(ctx context.Context, id string) (bool, error)

	// Mark remembers that the record with id was handled.
	Mark(ctx context.Context, id string) error
}

// ErrNotMarked is returned by a handler from Idempotent when the record was
// handled but the Store failed to remember it: a duplicate would be handled
// again. Retrying the same record would handle it again too, so a caller may
// log it and move on instead.
var ErrNotMarked = errors.New("handled, but its kdelay-id was not stored")

// Idempotent wraps handler so that it runs at most once per kdelay-id that
// store remembers, for consumers of a franz-go client:
//
//	handle := client.Idempotent(store, func(ctx context.Context, r *kgo.Record) error { ... })
//	fetches.EachRecord(func(r *kgo.Record) { err := handle(ctx, r); ... })
//
// An id is looked up before handler runs and marked only after it returns
// nil, so a record whose handler failed is handled again when it comes
// again; a duplicate is skipped and nil returned. A record without kdelay-id
// (one that did not come through kdelay) is handled every time.
//
// Wrap once and share the result: while it handles an id, another call with
// the same id waits for it, then skips the record if the first succeeded or
// handles it if the first failed. Calls through other wrappers, or other
// processes sharing a Store, do not wait: two of them seeing the same id at
// the same moment can both look it up, find it unmarked, and both run
// handler. Where that matters, make the handler's effect idempotent itself,
// e.g. mark the id in the same database transaction as the work.
func Idempotent(store Store, handler func(ctx context.Context, r *kgo.Record) error) func(ctx context.Context, r *kgo.Record) error {
	return IdempotentBy(store, ID, handler)
}

// IdempotentBy is Idempotent for records of any type: idOf returns a record's
// kdelay-id and whether it has one. Package kafkago uses it for kafka-go's
// messages; use it for other Kafka clients.
func IdempotentBy[R any](store Store, idOf func(R) (string, bool), handler func(context.Context, R) error) func(context.Context, R) error {
	f := &inflight{calls: map[string]chan struct{}{}}
	return func(ctx context.Context, r R) error {
		id, ok := idOf(r)
		if !ok {
			return handler(ctx, r)
		}
		done, err := f.enter(ctx, id)
		if err != nil {
			return err
		}
		defer done()
		return once(ctx, store, id, func(ctx context.Context) error { return handler(ctx, r) })
	}
}

// once runs handle unless store has seen id, and marks id if it succeeds.
func once(ctx context.Context, store Store, id string, handle func(context.Context) error) error {
	seen, err := store.Seen(ctx, id)
	if err != nil {
		return fmt.Errorf("look up %s %s: %w", kdelay.HeaderID, id, err)
	}
	if seen {
		return nil
	}
	if err := handle(ctx); err != nil {
		return err
	}
	if err := store.Mark(ctx, id); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrNotMarked, kdelay.HeaderID, id, err)
	}
	return nil
}

// inflight lets one call at a time handle an id. Without it two copies of a
// record handled at once would both find the id unmarked and both run.
type inflight struct {
	mu    sync.Mutex
	calls map[string]chan struct{} // closed when the call handling id ends
}

// enter waits until no other call handles id, then claims it; done releases
// it.
func (f *inflight) enter(ctx context.Context, id string) (done func(), err error) {
	for {
		f.mu.Lock()
		busy, ok := f.calls[id]
		if !ok {
			mine := make(chan struct{})
			f.calls[id] = mine
			f.mu.Unlock()
			return func() { f.exit(id, mine) }, nil
		}
		f.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the handler of %s %s: %w", kdelay.HeaderID, id, context.Cause(ctx))
		}
	}
}

func (f *inflight) exit(id string, mine chan struct{}) {
	f.mu.Lock()
	delete(f.calls, id)
	f.mu.Unlock()
	close(mine)
}
