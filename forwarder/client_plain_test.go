package forwarder

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestRunSharesItsClient: a Forwarder given a client (Config.Client, as
// kdelay serve gives the one its admin listener and console use) reads the
// commands through it, so a cancel written at once is in force, and leaves
// it open when it stops, for the others that use it.
func TestRunSharesItsClient(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	cl, err := NewPlainClient(fx.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cfg := fx.cfg
	cfg.Client = cl
	arrived := fx.cluster.Collect(fx.target)
	_, stop := fx.start(cfg)
	fx.send("cancelled", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "cancelled", kdelay.HeaderDelay, "3s")
	fx.command("cancelled", kdelay.CommandCancel)
	fx.send("witness", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "witness", kdelay.HeaderDelay, "4s")
	got := arrived.Until(30*time.Second, func(as []kafkatest.Arrival) bool {
		return slices.ContainsFunc(as, func(a kafkatest.Arrival) bool { return string(a.Value) == "witness" })
	})
	if ids := kafkatest.IDs(got); ids["cancelled"] > 0 || ids["witness"] != 1 {
		t.Errorf("arrived %v, want the witness and not the cancelled record", ids)
	}
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err != nil {
		t.Errorf("the client given to Run answers no more after Run returned: %v", err)
	}
}
