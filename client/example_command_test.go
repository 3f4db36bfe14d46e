package client_test

import (
	"context"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/client"
)

func ExampleProducer_Cancel() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("localhost:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	p, err := client.NewProducer(ctx, cl, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// Close order 42 in 30 minutes unless it is paid.
	id, err := p.Send(ctx, "order-close", &kgo.Record{Key: []byte("42")}, client.After(30*time.Minute),
		client.WithID("order-42-close"))
	if err != nil {
		log.Fatal(err)
	}
	// It was paid: kdelay will not deliver it. A cancel cannot undo a
	// delivery already made; the consumer of order-close sees kdelay-id
	// order-42-close if it was.
	if err := p.Cancel(ctx, id); err != nil {
		log.Fatal(err)
	}
}

func ExampleProducer_Reschedule() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("localhost:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	p, err := client.NewProducer(ctx, cl, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// A heartbeat from device 7 pushes its "offline" record 30 s ahead:
	// kdelay delivers it once, 30 s after the last heartbeat, never at an
	// earlier time.
	if err := p.Reschedule(ctx, "device-7-offline", client.After(30*time.Second)); err != nil {
		log.Fatal(err)
	}
	// Or at a time.
	if err := p.Reschedule(ctx, "order-42-close", client.At(time.Now().Add(time.Hour))); err != nil {
		log.Fatal(err)
	}
}

func ExampleProducer_RunNow() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("localhost:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	p, err := client.NewProducer(ctx, cl, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// Publish post 9 now instead of at 08:00 tomorrow, and not again then.
	if err := p.RunNow(ctx, "post-9-publish"); err != nil {
		log.Fatal(err)
	}
}
