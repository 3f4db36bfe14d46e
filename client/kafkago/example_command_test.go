package kafkago_test

import (
	"context"
	"log"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/kafkago"
)

func ExampleProducer_Cancel() {
	w := &kafka.Writer{Addr: kafka.TCP("localhost:9092"), RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	ctx := context.Background()
	p, err := kafkago.NewProducer(ctx, w, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// Order 42 was paid: kdelay will not deliver its "close" record. A
	// cancel cannot undo a delivery already made.
	if err := p.Cancel(ctx, "order-42-close"); err != nil {
		log.Fatal(err)
	}
}

func ExampleProducer_Reschedule() {
	w := &kafka.Writer{Addr: kafka.TCP("localhost:9092"), RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	ctx := context.Background()
	p, err := kafkago.NewProducer(ctx, w, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// A heartbeat pushes device 7's "offline" record 30 s ahead.
	if err := p.Reschedule(ctx, "device-7-offline", client.After(30*time.Second)); err != nil {
		log.Fatal(err)
	}
}

func ExampleProducer_RunNow() {
	w := &kafka.Writer{Addr: kafka.TCP("localhost:9092"), RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	ctx := context.Background()
	p, err := kafkago.NewProducer(ctx, w, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	// Publish post 9 now, and not again at its old time.
	if err := p.RunNow(ctx, "post-9-publish"); err != nil {
		log.Fatal(err)
	}
}
