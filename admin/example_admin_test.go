package admin_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/forwarder"
)

// A program that embeds the forwarder serves kdelay's metrics and health
// checks beside it: the Metrics observes the forwarder, the Server reads it.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	brokers := []string{"localhost:9092"}

	m := admin.NewMetrics()
	f, err := forwarder.New(forwarder.Config{Brokers: brokers, Observer: m})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := admin.New(admin.Config{Addr: ":9464", Forwarder: f, Metrics: m, Brokers: brokers})
	if err != nil {
		log.Fatal(err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error { return f.Run(gctx) })
	if err := g.Wait(); err != nil {
		log.Fatal(err)
	}
}
