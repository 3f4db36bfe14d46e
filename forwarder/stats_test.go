package forwarder

import (
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// TestStatsCountOnce checks that a record counts as Delivered once, when its
// target takes it, whatever happened to it before: a record held in memory
// below the smallest level is not delivered yet, and a command may still
// cancel it or move it.
func TestStatsCountOnce(t *testing.T) {
	t.Parallel()
	// delivered waits, in bubble time, until f has counted n deliveries,
	// and returns its stats then.
	delivered := func(f *Forwarder, n int64) Stats {
		for end := time.Now().Add(time.Minute); f.Stats().Delivered < n && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond) // a deadline-bounded poll
		}
		return f.Stats()
	}
	t.Run("held, then cancelled: Cancelled, not Delivered", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			f, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("witness", time.Minute)
			b.delayed("order-1", 900*time.Millisecond) // held: below the 1s level
			b.delayed("witness", 2*time.Second)
			time.Sleep(100 * time.Millisecond)
			b.command("order-1", kdelay.CommandCancel)
			arrivals()
			if got := delivered(f, 1); got.Delivered != 1 || got.Cancelled != 1 {
				t.Errorf("Stats = %+v after one record cancelled while held and one delivered; want Delivered 1, Cancelled 1", got)
			}
		})
	})
	t.Run("held, then rescheduled: Delivered once", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			f, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("witness", time.Minute)
			b.delayed("dev-7", 900*time.Millisecond)
			b.delayed("witness", 3*time.Second)
			time.Sleep(100 * time.Millisecond)
			b.command("dev-7", kdelay.CommandReschedule, kdelay.HeaderDelay, "500ms") // held again
			if at := arrivals(); len(at["dev-7"]) != 1 {
				t.Fatalf("dev-7 arrived %d times, want once", len(at["dev-7"]))
			}
			if got := delivered(f, 2); got.Delivered != 2 {
				t.Errorf("Stats.Delivered = %d after two records delivered, one of them rescheduled while held; want 2", got.Delivered)
			}
		})
	})
}
