package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
)

func ExampleIdempotent() {
	store := client.NewMemoryStore(100_000, time.Hour)
	handle := client.Idempotent(store, func(ctx context.Context, r *kgo.Record) error {
		fmt.Printf("remind %s\n", r.Key)
		return nil
	})

	// The same record delivered twice, as at-least-once delivery may.
	r := &kgo.Record{Key: []byte("order-42"), Headers: []kgo.RecordHeader{{Key: kdelay.HeaderID, Value: []byte("id-1")}}}
	for range 2 {
		if err := handle(context.Background(), r); err != nil {
			fmt.Println(err)
		}
	}
	// Output: remind order-42
}

func ExampleIdempotent_consumer() {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers("localhost:9092"),
		kgo.ConsumeTopics("reminders"),
		kgo.ConsumerGroup("reminder-sender"),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	handle := client.Idempotent(client.NewMemoryStore(100_000, time.Hour), func(ctx context.Context, r *kgo.Record) error {
		return nil // send the reminder
	})
	ctx := context.Background()
	for {
		fetches := cl.PollFetches(ctx)
		if fetches.IsClientClosed() {
			return
		}
		fetches.EachRecord(func(r *kgo.Record) {
			// The client commits what was polled, so retry a record until
			// it is handled. ErrNotMarked means it was.
			for err := handle(ctx, r); err != nil && !errors.Is(err, client.ErrNotMarked); err = handle(ctx, r) {
				log.Printf("not sent, retrying: %v", err)
				time.Sleep(time.Second)
			}
		})
	}
}

func ExampleNewMemoryStore() {
	store := client.NewMemoryStore(2, time.Hour)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		_ = store.Mark(ctx, id)
	}
	for _, id := range []string{"a", "b", "c"} {
		seen, _ := store.Seen(ctx, id)
		fmt.Println(id, seen)
	}
	// Output:
	// a false
	// b true
	// c true
}

func ExampleIdempotentBy() {
	// A message type of another Kafka client, with its headers in a map.
	type message struct {
		headers map[string]string
		body    string
	}
	idOf := func(m message) (string, bool) {
		id, ok := m.headers[kdelay.HeaderID]
		return id, ok && id != ""
	}
	handle := client.IdempotentBy(client.NewMemoryStore(1000, time.Hour), idOf, func(ctx context.Context, m message) error {
		fmt.Println("handle", m.body)
		return nil
	})
	m := message{headers: map[string]string{kdelay.HeaderID: "id-1"}, body: "hello"}
	_ = handle(context.Background(), m)
	_ = handle(context.Background(), m)
	// Output: handle hello
}
