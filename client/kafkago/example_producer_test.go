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
	// NewProducer fails if the broker lacks the server's topics, or does
	// not answer within 10 seconds.
	p, err := kafkago.NewProducer(context.Background(), w, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	_ = p
}

func ExampleProducer_Send() {
	w := &kafka.Writer{Addr: kafka.TCP("localhost:9092"), RequiredAcks: kafka.RequireAll, BatchTimeout: 5 * time.Millisecond}
	defer w.Close()
	ctx := context.Background()
	p, err := kafkago.NewProducer(ctx, w, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	msg := kafka.Message{Key: []byte("order-42"), Value: []byte(`{"remind":"payment"}`)}
	id, err := p.Send(ctx, "reminders", msg, client.After(90*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reminder", id, "is due in 90s")

	// An id of your own, which consumers dedupe by, and headers that are
	// delivered after the message's own.
	_, err = p.Send(ctx, "reminders", msg, client.After(90*time.Second),
		client.WithID("order-42-payment"),
		kafkago.WithHeaders(kafka.Header{Key: "trace-id", Value: []byte("abc")}))
	if err != nil {
		log.Fatal(err)
	}
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

func ExampleDelayed_options() {
	// An id, headers, and a server run with --topic-prefix payments.
	m := kafkago.Delayed("reminders", []byte("order-42"), []byte("pay"), client.After(90*time.Second),
		client.WithID("order-42-payment"),
		kafkago.WithHeaders(kafka.Header{Key: "trace-id", Value: []byte("abc")}),
		client.WithTopicPrefix("payments"))
	fmt.Println(m.Topic)
	for _, h := range m.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	// Output:
	// payments.ingress
	// trace-id: abc
	// kdelay-id: order-42-payment
	// kdelay-target: reminders
	// kdelay-delay: 90000
}

func ExampleWithHeaders() {
	m := kafkago.Delayed("reminders", nil, []byte("pay"), client.After(time.Second),
		kafkago.WithHeaders(kafka.Header{Key: "trace-id", Value: []byte("abc")}))
	fmt.Printf("%s: %s\n", m.Headers[0].Key, m.Headers[0].Value)
	// Output: trace-id: abc
}
