package kafkago

import (
	"context"

	"github.com/segmentio/kafka-go"

	"github.com/kdelay/kdelay/client"
)

// Idempotent is client.Idempotent for kafka-go: it wraps handler so that it
// runs at most once per kdelay-id that store remembers, marking an id only
// after handler returns nil. A message without kdelay-id is handled every
// time. See client.Idempotent for what happens to concurrent duplicates.
//
//	handle := kafkago.Idempotent(store, func(ctx context.Context, m kafka.Message) error { ... })
//	m, err := r.FetchMessage(ctx)
//	if err := handle(ctx, m); err == nil { r.CommitMessages(ctx, m) }
func Idempotent(store client.Store, handler func(ctx context.Context, m kafka.Message) error) func(ctx context.Context, m kafka.Message) error {
	return client.IdempotentBy(store, ID, handler)
}
