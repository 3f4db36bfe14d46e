package kafkago_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/kafkago"
)

func ExampleNewProducer() {
	w := &kafka.Writer{
		Addr:         kafka.TCP("localhost:9092"),
		RequiredAcks: kafka.RequireAll,     // kafka-go's default is none: writes could be lost
		BatchTimeout: 5 * time.Millisecond, // kafka-go's default 1s would hold each Send that long
		Balancer:     &kafka.Hash{},
	}
	defer w.Close()
	p, err := kafkago.NewProducer(w, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	_ = p
}

func ExampleProducer_Send() {
	w := &kafka.Writer{Addr: kafka.TCP("localhost:9092"), RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	p, err := kafkago.NewProducer(w, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	msg := kafka.Message{Key: []byte("order-42"), Value: []byte(`{"remind":"payment"}`)}
	id, err := p.Send(context.Background(), "reminders", msg, client.After(90*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reminder", id, "is due in 90s")
}

func ExampleDelayed() {
	// For writing with your own kafka.Writer, which must have no Topic.
	m := kafkago.Delayed("reminders", []byte("order-42"), []byte("pay"), client.After(90*time.Second))
	fmt.Println(m.Topic)
	for _, h := range m.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	// Output:
	// kdelay.ingress
	// kdelay-target: reminders
	// kdelay-delay: 90000
}
