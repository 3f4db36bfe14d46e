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
	p, err := client.NewProducer(cl, client.ProducerConfig{})
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
	p, err := client.NewProducer(cl, client.ProducerConfig{Topics: kdelay.Topics{Prefix: "payments"}, Levels: set})
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
	p, err := client.NewProducer(cl, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	rec := &kgo.Record{
		Key:     []byte("order-42"),
		Value:   []byte(`{"remind":"payment"}`),
		Headers: []kgo.RecordHeader{{Key: "trace-id", Value: []byte("abc")}},
	}
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
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "kdelay-id", Value: []byte("0199a8c4-7b1e-7c3d-9f0a-2b4c6d8e0f12")}}}
	id, ok := client.ID(r)
	fmt.Println(id, ok)
	// Output: 0199a8c4-7b1e-7c3d-9f0a-2b4c6d8e0f12 true
}
