package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/levels"
)

func ExampleNewProducer() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("localhost:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	// The zero ProducerConfig matches a kdelay server run with its
	// defaults: prefix "kdelay", RocketMQ's 18 levels, 400 days at most.
	// NewProducer fails if the broker lacks the server's topics, or does
	// not answer within 10 seconds.
	p, err := client.NewProducer(context.Background(), cl, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	_ = p
}

func ExampleNewProducer_serverConfig() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("localhost:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	// The server runs with --topic-prefix payments --levels 1s,10s,1m,10m,1h.
	set, err := levels.Parse([]string{"1s", "10s", "1m", "10m", "1h"})
	if err != nil {
		log.Fatal(err)
	}
	p, err := client.NewProducer(context.Background(), cl, client.ProducerConfig{Topics: kdelay.Topics{Prefix: "payments"}, Levels: set})
	if err != nil {
		log.Fatal(err)
	}
	_ = p
}

func ExampleProducer_Send() {
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
	rec := &kgo.Record{Key: []byte("order-42"), Value: []byte(`{"remind":"payment"}`)}
	id, err := p.Send(ctx, "reminders", rec, client.After(90*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reminder", id, "is due in 90s")

	// At a wall-clock time; a time in the past is delivered at once.
	tomorrow := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	if _, err := p.Send(ctx, "reminders", rec, client.At(tomorrow)); err != nil {
		log.Fatal(err)
	}
}

func ExampleProducer_Send_options() {
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
	// An id of your own, which consumers dedupe by, and headers that are
	// delivered after the record's own.
	rec := &kgo.Record{Key: []byte("order-42"), Value: []byte(`{"remind":"payment"}`)}
	_, err = p.Send(ctx, "reminders", rec, client.After(90*time.Second),
		client.WithID("order-42-payment"),
		client.WithHeaders(kgo.RecordHeader{Key: "trace-id", Value: []byte("abc")}))
	if err != nil {
		// A record kdelay would dead-letter fails here, with kdelay's reason.
		log.Fatal(err)
	}
}

func ExampleProducerConfig_skipTopicCheck() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("localhost:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	// For a process that starts before its broker is reachable: a wrong
	// prefix or level is then found by the first Send.
	p, err := client.NewProducer(context.Background(), cl, client.ProducerConfig{SkipTopicCheck: true})
	if err != nil {
		log.Fatal(err)
	}
	_ = p
}

func ExampleDelayed() {
	// For producing with your own kgo.Client: cl.Produce(ctx, r, onAck).
	r := client.Delayed("reminders", []byte("order-42"), []byte("pay"), client.After(90*time.Second))
	fmt.Println(r.Topic)
	for _, h := range r.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	// Output:
	// kdelay.ingress
	// kdelay-target: reminders
	// kdelay-delay: 90000
}

func ExampleDelayed_options() {
	// An id, headers, and a server run with --topic-prefix payments.
	r := client.Delayed("reminders", []byte("order-42"), []byte("pay"), client.After(90*time.Second),
		client.WithID("order-42-payment"),
		client.WithHeaders(kgo.RecordHeader{Key: "trace-id", Value: []byte("abc")}),
		client.WithTopicPrefix("payments"))
	fmt.Println(r.Topic)
	for _, h := range r.Headers {
		fmt.Printf("%s: %s\n", h.Key, h.Value)
	}
	// Output:
	// payments.ingress
	// trace-id: abc
	// kdelay-id: order-42-payment
	// kdelay-target: reminders
	// kdelay-delay: 90000
}

func ExampleWithID() {
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
	rec := &kgo.Record{Key: []byte("order-42"), Value: []byte("pay")}
	id, err := p.Send(ctx, "reminders", rec, client.After(time.Hour))
	if err != nil && id != "" {
		// Not acknowledged: retry under the same id, so that consumers
		// dedupe if the first write did land.
		_, err = p.Send(ctx, "reminders", rec, client.After(time.Hour), client.WithID(id))
	}
	if err != nil {
		log.Fatal(err)
	}
}

func ExampleWithHeaders() {
	r := client.Delayed("reminders", nil, []byte("pay"), client.After(time.Second),
		client.WithHeaders(kgo.RecordHeader{Key: "trace-id", Value: []byte("abc")}))
	fmt.Printf("%s: %s\n", r.Headers[0].Key, r.Headers[0].Value)
	// Output: trace-id: abc
}

func ExampleWithTopicPrefix() {
	// The server runs with --topic-prefix payments.
	r := client.Delayed("reminders", nil, []byte("pay"), client.After(time.Second), client.WithTopicPrefix("payments"))
	fmt.Println(r.Topic)
	// Output: payments.ingress
}

func ExampleAfter() {
	fmt.Println(client.After(90 * time.Second))
	// Output: after 1m30s
}

func ExampleAt() {
	fmt.Println(client.At(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)))
	// Output: at 2026-11-22T08:00:00Z
}

func ExampleDelay_Due() {
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	due, err := client.After(90 * time.Second).Due(now)
	fmt.Println(due, err)
	_, err = client.After(-time.Second).Due(now)
	fmt.Println(err)
	// Output:
	// 2026-11-22 08:01:30 +0000 UTC <nil>
	// After(-1s): negative delay; use After(0) to deliver now, or At(t) for a time
}

func ExampleID() {
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: kdelay.HeaderID, Value: []byte("0199a8c4-7b1e-7c3d-9f0a-2b4c6d8e0f12")}}}
	id, ok := client.ID(r)
	fmt.Println(id, ok)
	// Output: 0199a8c4-7b1e-7c3d-9f0a-2b4c6d8e0f12 true
}
