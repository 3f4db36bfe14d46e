package client_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
)

// handled stands for a table of the ids a consumer has handled, in the
// database its handler writes to: a Store there dedupes across consumers
// and restarts, which MemoryStore cannot. With SQL, Seen is a SELECT by
// primary key and Mark an INSERT ... ON CONFLICT DO NOTHING, ideally in the
// transaction that does the work.
type handled struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (h *handled) Seen(_ context.Context, id string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ids[id], nil
}

func (h *handled) Mark(_ context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids[id] = true
	return nil
}

func ExampleStore() {
	store := &handled{ids: map[string]bool{}}
	handle := client.Idempotent(store, func(ctx context.Context, r *kgo.Record) error {
		fmt.Printf("remind %s\n", r.Key)
		return nil
	})
	// Two consumers of one group may each see the record once, after a
	// rebalance: they share the store, so only the first handles it.
	r := &kgo.Record{Key: []byte("order-42"), Headers: []kgo.RecordHeader{{Key: kdelay.HeaderID, Value: []byte("id-1")}}}
	for range 2 {
		if err := handle(context.Background(), r); err != nil {
			fmt.Println(err)
		}
	}
	// Output: remind order-42
}
