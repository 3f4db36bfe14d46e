package admin

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/forwarder"
)

// TestSharedClient: the listener asks through the client the forwarder
// reads its commands with, as kdelay serve runs them, and leaves it open
// when it stops, for the others that use it.
func TestSharedClient(t *testing.T) {
	t.Parallel()
	var cl *kgo.Client
	fx := setupWith(t, func(c *forwarder.Config) {
		var err error
		if cl, err = forwarder.NewPlainClient(*c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close) // after the forwarder's run stops: cleanups run last first
		c.Client = cl
	})
	fx.run(fx.fwd.Run)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fx.srv.Run(ctx) }()
	fx.waitStatus("/readyz", 200, 30*time.Second)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	ping, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ping); err != nil {
		t.Errorf("the client given to the listener answers no more after it stopped: %v", err)
	}
}
