package forwarder

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestSessionTimeoutTheBrokerRefuses: a session timeout outside the range
// the brokers allow (group.min.session.timeout.ms, 6s by default) is refused
// at every join. Run ends with an error that names the setting and says how
// to fix it, rather than retrying the join for as long as it runs, alive and
// forwarding nothing.
func TestSessionTimeoutTheBrokerRefuses(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	cfg.SessionTimeout = 2 * time.Second
	f, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = f.Run(ctx)
	if ctx.Err() != nil {
		t.Fatal("Run still running after 60s with a session timeout the broker refuses at every join")
	}
	if !errors.Is(err, kerr.InvalidSessionTimeout) || !strings.Contains(err.Error(), "session-timeout 2s") {
		t.Errorf("Run: %v, want INVALID_SESSION_TIMEOUT naming session-timeout 2s", err)
	}
}
