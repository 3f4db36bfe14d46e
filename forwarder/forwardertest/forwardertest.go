// Package forwardertest runs a kdelay server in a test, as httptest runs an
// HTTP server: the client, the examples and the admin listener are tested
// against the real forwarder, on the test's broker.
package forwardertest

import (
	"context"
	"testing"
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// readyTimeout bounds how long Serve waits for the forwarder's topics and
// groups.
const readyTimeout = 30 * time.Second

// Serve runs a Forwarder with cfg until the test ends, and returns it once it
// is ready. The test fails if it does not get ready, or if Run returns an
// error.
func Serve(t testing.TB, cfg forwarder.Config) *forwarder.Forwarder {
	t.Helper()
	f, err := forwarder.New(cfg)
	if err != nil {
		t.Fatalf("forwarder.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("forwarder Run: %v", err)
		}
	})
	select {
	case <-f.Ready():
	case err := <-done:
		done <- err // for the cleanup
		t.Fatalf("forwarder Run returned before ready: %v", err)
	case <-time.After(readyTimeout):
		t.Fatalf("forwarder not ready after %s", readyTimeout)
	}
	return f
}
