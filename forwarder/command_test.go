package forwarder

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// The commands tests run in a synctest bubble (clock_test.go): a record can
// wait in a 10-minute level and a test can say it arrived at its new due
// time, to the millisecond, without waiting ten minutes.

// commandLevels hide a 25-minute delay in the 10m level for ten minutes:
// long enough that a command due sooner finds it there.
var commandLevels = []string{"1s", "10s", "1m", "10m"}

// command writes a command for id to the control topic, as kcat would.
func (b *bubble) command(id, name string, headers ...string) {
	b.t.Helper()
	b.produce(b.commandRecord(id, name, headers...))
}

// commandRecord is the record of a command for id, with headers in pairs.
func (b *bubble) commandRecord(id, name string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: b.cfg.WithDefaults().Topics.Control(), Key: []byte(id), Value: []byte{},
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderCommand, Value: []byte(name)}}}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// delayed writes a record with id to the ingress, due after d.
func (b *bubble) delayed(id string, d time.Duration) time.Time {
	r := ingress(b.cfg, b.target, id, kdelay.HeaderID, id, kdelay.HeaderDelay, d.String())
	r.Timestamp = time.Now()
	b.produce(r)
	return kdelay.CeilMillis(r.Timestamp.Truncate(time.Millisecond).Add(d))
}

// watch reads the target until the witness id arrives, within limit of
// bubble time, and returns the arrival times of every id.
func (b *bubble) watch(witness string, limit time.Duration) func() map[string][]time.Time {
	c := kafkatest.Collect(b.t, b.cfg.Brokers, b.target, b.dial, kgo.FetchMaxWait(5*time.Second))
	return func() map[string][]time.Time {
		got := c.Until(limit, func(as []kafkatest.Arrival) bool {
			return slices.ContainsFunc(as, func(a kafkatest.Arrival) bool { return string(a.Value) == witness })
		})
		at := map[string][]time.Time{}
		for _, a := range got {
			at[string(a.Value)] = append(at[string(a.Value)], a.At)
		}
		if at[witness] == nil {
			b.t.Fatalf("witness %s did not arrive within %s; arrived: %v", witness, limit, at)
		}
		return at
	}
}

// onTime fails unless id arrived exactly once, at due (within the 20ms a
// client's first produce to a topic may take, as in TestNeverEarly).
func onTime(t *testing.T, at map[string][]time.Time, id string, due time.Time) {
	t.Helper()
	switch got := at[id]; {
	case len(got) != 1:
		t.Errorf("%s arrived %d times (%v), want once at %s", id, len(got), got, due)
	case got[0].Before(due):
		t.Errorf("%s arrived %s early", id, due.Sub(got[0]))
	case got[0].Sub(due) > 20*time.Millisecond:
		t.Errorf("%s arrived %s after its new due time; want it then", id, got[0].Sub(due))
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	t.Run("before due, in a level: never delivered", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			f, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("witness", time.Hour)
			b.delayed("order-1", 25*time.Minute)
			b.delayed("witness", 26*time.Minute)
			time.Sleep(5 * time.Second)
			b.command("order-1", kdelay.CommandCancel)
			if at := arrivals(); at["order-1"] != nil {
				t.Errorf("order-1 was cancelled, and arrived at %v", at["order-1"])
			}
			if got := f.Stats().Cancelled; got != 1 {
				t.Errorf("Stats.Cancelled = %d, want 1", got)
			}
		})
	})
	t.Run("while held in memory below the smallest level: counted Cancelled, not Delivered", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			f, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("witness", time.Minute)
			b.delayed("order-1", 900*time.Millisecond)
			b.delayed("witness", 2*time.Second)
			time.Sleep(100 * time.Millisecond)
			b.command("order-1", kdelay.CommandCancel)
			if at := arrivals(); at["order-1"] != nil {
				t.Errorf("order-1 was cancelled, and arrived at %v", at["order-1"])
			}
			if got := delivered(f, 1); got.Delivered != 1 || got.Cancelled != 1 {
				t.Errorf("Stats = %+v after one record cancelled while held and one delivered; want Delivered 1, Cancelled 1", got)
			}
		})
	})
	t.Run("after delivery: reported unmatched", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			log, book := captureLogs(t)
			b.cfg.Logger = log
			b.cfg.RetentionHeadroom = time.Minute
			f, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("order-1", time.Minute)
			b.delayed("order-1", time.Second)
			arrivals()
			b.command("order-1", kdelay.CommandCancel)
			// Kept for the largest level plus the headroom, then reported.
			time.Sleep(12 * time.Minute)
			if book.line(0, "command_unmatched", "id=order-1") == "" {
				t.Error("no command_unmatched line for order-1, cancelled after its delivery")
			}
			if got := f.Commands(); got.Unmatched != 1 || got.Live != 0 {
				t.Errorf("Commands() = %+v, want 1 unmatched and none live", got)
			}
		})
	})
}

func TestReschedule(t *testing.T) {
	t.Parallel()
	t.Run("later: once, at the new time", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			_, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("witness", time.Hour)
			b.delayed("dev-7", 30*time.Second)
			b.delayed("witness", 3*time.Minute)
			time.Sleep(2 * time.Second)
			b.command("dev-7", kdelay.CommandReschedule, kdelay.HeaderDelay, "100s")
			due := kdelay.CeilMillis(time.Now().Truncate(time.Millisecond).Add(100 * time.Second))
			onTime(t, arrivals(), "dev-7", due)
		})
	})
	t.Run("while held in memory: once, at the new time, counted Delivered once", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			f, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("witness", time.Minute)
			b.delayed("dev-7", 900*time.Millisecond) // held: below the 1s level
			b.delayed("witness", 3*time.Second)
			time.Sleep(100 * time.Millisecond)
			b.command("dev-7", kdelay.CommandReschedule, kdelay.HeaderDelay, "500ms") // held again
			due := kdelay.CeilMillis(time.Now().Truncate(time.Millisecond).Add(500 * time.Millisecond))
			onTime(t, arrivals(), "dev-7", due)
			if got := delivered(f, 2); got.Delivered != 2 {
				t.Errorf("Stats.Delivered = %d after two records delivered, one of them rescheduled while held; want 2", got.Delivered)
			}
		})
	})
	t.Run("earlier than its level releases it: found and delivered then", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			_, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("witness", time.Hour)
			b.delayed("order-1", 25*time.Minute) // in the 10m level until 10 minutes from now
			b.delayed("witness", 30*time.Minute)
			time.Sleep(5 * time.Second)
			b.command("order-1", kdelay.CommandReschedule, kdelay.HeaderDelay, "30s")
			due := kdelay.CeilMillis(time.Now().Truncate(time.Millisecond).Add(30 * time.Second))
			onTime(t, arrivals(), "order-1", due)
		})
	})
	t.Run("heartbeats: each pushes the deadline, one delivery at the last", func(t *testing.T) {
		inBubble(t, commandLevels, func(b *bubble) {
			f, stop := b.start(b.cfg)
			defer stop()
			arrivals := b.watch("witness", time.Hour)
			b.delayed("dev-7", 30*time.Second)
			b.delayed("witness", 5*time.Minute)
			var due time.Time
			for range 120 { // a heartbeat a second for two minutes
				time.Sleep(time.Second)
				b.command("dev-7", kdelay.CommandReschedule, kdelay.HeaderDelay, "30s")
				due = kdelay.CeilMillis(time.Now().Truncate(time.Millisecond).Add(30 * time.Second))
			}
			onTime(t, arrivals(), "dev-7", due)
			if got := f.Commands().Live; got != 1 {
				t.Errorf("%d commands live for one device, want 1", got)
			}
		})
	})
}

func TestRunNow(t *testing.T) {
	t.Parallel()
	inBubble(t, commandLevels, func(b *bubble) {
		_, stop := b.start(b.cfg)
		defer stop()
		arrivals := b.watch("witness", time.Hour)
		b.delayed("post-3", 25*time.Minute)
		b.delayed("witness", 30*time.Minute)
		time.Sleep(5 * time.Second)
		b.command("post-3", kdelay.CommandRunNow)
		now := time.Now().Truncate(time.Millisecond)
		onTime(t, arrivals(), "post-3", now)
	})
}

// delivered waits, in bubble time, until f has counted n deliveries, and
// returns its stats then: the loop counts a delivery when it applies the
// broker's acknowledgement, after the consumer may have seen the record.
func delivered(f *Forwarder, n int64) Stats {
	for end := time.Now().Add(time.Minute); f.Stats().Delivered < n && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond) // a deadline-bounded poll
	}
	return f.Stats()
}

// TestCommandsSurviveRestart stops the forwarder after each command and
// starts another: the new one reads every command before it forwards, and
// drops a record moved ahead before the restart when it leaves its level.
func TestCommandsSurviveRestart(t *testing.T) {
	t.Parallel()
	inBubble(t, commandLevels, func(b *bubble) {
		arrivals := b.watch("witness", time.Hour)
		_, stop := b.start(b.cfg)
		b.delayed("cancelled", 25*time.Minute)
		b.delayed("moved", 25*time.Minute)
		b.delayed("later", 30*time.Second)
		b.delayed("witness", 30*time.Minute)
		time.Sleep(5 * time.Second)
		b.command("cancelled", kdelay.CommandCancel)
		b.command("later", kdelay.CommandReschedule, kdelay.HeaderDelay, "2m")
		later := kdelay.CeilMillis(time.Now().Truncate(time.Millisecond).Add(2 * time.Minute))
		b.command("moved", kdelay.CommandRunNow)
		moved := time.Now().Truncate(time.Millisecond)
		time.Sleep(5 * time.Second) // moved ahead, and marked
		stop()
		_, stop = b.start(b.cfg)
		defer stop()
		at := arrivals()
		if at["cancelled"] != nil {
			t.Errorf("cancelled arrived at %v", at["cancelled"])
		}
		onTime(t, at, "later", later)
		if got := at["moved"]; len(got) != 1 || got[0].Before(moved) || got[0].Sub(moved) > 20*time.Millisecond {
			t.Errorf("moved arrived at %v, want once at %s, before the restart", got, moved)
		}
	})
}

// start runs a Forwarder in the bubble and returns it and its stop.
func (b *bubble) start(cfg Config) (*Forwarder, func()) {
	f, err := New(cfg)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	<-f.Ready()
	stopped := false
	return f, func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			b.t.Errorf("Run: %v", err)
		}
	}
}
