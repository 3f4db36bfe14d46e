package kafkago_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/kafkago"
)

func ExampleIdempotent() {
	handle := kafkago.Idempotent(client.NewMemoryStore(100_000, time.Hour), func(ctx context.Context, m kafka.Message) error {
		fmt.Printf("remind %s\n", m.Key)
		return nil
	})
	// The same message delivered twice, as at-least-once delivery may.
	m := kafka.Message{Key: []byte("order-42"), Headers: []kafka.Header{{Key: kdelay.HeaderID, Value: []byte("id-1")}}}
	_ = handle(context.Background(), m)
	_ = handle(context.Background(), m)
	// Output: remind order-42
}

func ExampleIdempotent_reader() {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{"localhost:9092"},
		GroupID: "reminder-sender",
		Topic:   "reminders",
	})
	defer r.Close()
	handle := kafkago.Idempotent(client.NewMemoryStore(100_000, time.Hour), func(ctx context.Context, m kafka.Message) error {
		return nil // send the reminder
	})
	ctx := context.Background()
	for {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			return
		}
		// Committing a later message would skip this one, so retry it
		// until it is handled. ErrNotMarked means it was.
		for err := handle(ctx, m); err != nil && !errors.Is(err, client.ErrNotMarked); err = handle(ctx, m) {
			log.Printf("not sent, retrying: %v", err)
			time.Sleep(time.Second)
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			log.Printf("commit: %v", err)
		}
	}
}

func ExampleID() {
	m := kafka.Message{Headers: []kafka.Header{{Key: kdelay.HeaderID, Value: []byte("id-1")}}}
	fmt.Println(kafkago.ID(m))
	// Output: id-1 true
}
