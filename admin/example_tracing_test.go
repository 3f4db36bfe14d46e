package admin_test

import (
	"context"
	"fmt"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/forwarder"
)

// A program that embeds the forwarder traces every record it receives and
// publishes by giving Tracing's hooks to the forwarder's Kafka clients, and
// sends the last spans once the forwarder has stopped.
func ExampleNewTracing() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()

	tracing, err := admin.NewTracing(ctx, admin.TracingConfig{Endpoint: "http://otel-collector:4318"})
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tracing.Shutdown(ctx); err != nil {
			log.Print(err)
		}
	}()
	f, err := forwarder.New(forwarder.Config{Brokers: []string{"localhost:9092"}, ClientOpts: tracing.ClientOpts()})
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Run(ctx); err != nil {
		log.Print(err)
	}
}

// TracesURL is where the spans of an endpoint given without a path go.
func ExampleTracesURL() {
	u, err := admin.TracesURL("http://otel-collector:4318")
	fmt.Println(u, err)
	// Output: http://otel-collector:4318/v1/traces <nil>
}
