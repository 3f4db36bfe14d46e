package client_test

import (
	"context"
	"log"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
)

func ExampleProducer_Schedule() {
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
	// The daily report at 02:30 Berlin time, on the wall clock: on the day
	// the clocks skip 02:30 it comes at 03:00, on the day they repeat it,
	// once.
	err = p.Schedule(ctx, "daily-report", kdelay.ScheduleFields{Spec: "0 30 2 * * *", TimeZone: "Europe/Berlin", Target: "reports"},
		&kgo.Record{Value: []byte(`{"report": "daily"}`)})
	if err != nil {
		log.Fatal(err)
	}
	// No more reports.
	if err := p.Unschedule(ctx, "daily-report"); err != nil {
		log.Fatal(err)
	}
}
