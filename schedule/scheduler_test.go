package schedule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// arrived returns, once want records arrived at the target or limit of
// bubble time passed, their ids in order of arrival, failing the test on a
// record that arrived before its time.
func arrived(t *testing.T, c *kafkatest.Collector, want int, limit time.Duration) []string {
	t.Helper()
	got := c.Until(limit, func(got []kafkatest.Arrival) bool { return len(got) >= want })
	var ids []string
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		due := kafkatest.DeliverAt(t, a.Record)
		switch late := a.At.Sub(due); {
		case late < 0:
			t.Errorf("%s arrived at %s, %s before its time", id, a.At.UTC(), -late)
		case late > 100*time.Millisecond:
			t.Errorf("%s arrived at %s, %s after its time, want within 100ms (at the floor, in bubble time)", id, a.At.UTC(), late)
		}
		ids = append(ids, id)
	}
	return ids
}

func ids(id string, times ...time.Time) []string {
	var out []string
	for _, t := range times {
		out = append(out, occurrence(id, t))
	}
	return out
}

func TestScheduler(t *testing.T) {
	t.Parallel()
	t.Run("occurrences delivered at their times, with the schedule's payload and headers", func(t *testing.T) {
		t.Parallel()
		inBubble(t, false, func(b *bubble) {
			b.run(b.cfg)
			target := b.collect("")
			b.schedule("every-minute", []byte("tick"), kdelay.HeaderSchedule, "0 * * * * *", kdelay.HeaderTarget, b.target, "source", "test")
			got := arrived(t, target, 3, 4*time.Minute)
			if want := ids("every-minute", minute(1, 0), minute(2, 0), minute(3, 0)); !slices.Equal(got, want) {
				t.Errorf("ids %v, want %v", got, want)
			}
			for _, a := range target.Arrivals() {
				if source, _ := kafkatest.Header(a.Record, "source"); string(a.Value) != "tick" || string(a.Key) != "every-minute" || source != "test" {
					t.Errorf("delivered key %q value %q source %q, want the schedule's: every-minute, tick, test", a.Key, a.Value, source)
				}
			}
		})
	})
	t.Run("a replace takes effect before the next occurrence", func(t *testing.T) {
		t.Parallel()
		inBubble(t, false, func(b *bubble) {
			b.run(b.cfg)
			target := b.collect("")
			b.schedule("s", []byte("old"), kdelay.HeaderSchedule, "0 * * * * *", kdelay.HeaderTarget, b.target)
			arrived(t, target, 2, 3*time.Minute) // 00:01 and 00:02; 00:03 is written, a minute ahead
			time.Sleep(10 * time.Second)
			b.schedule("s", []byte("new"), kdelay.HeaderSchedule, "30 * * * * *", kdelay.HeaderTarget, b.target)
			got := arrived(t, target, 4, 3*time.Minute)
			if want := ids("s", minute(1, 0), minute(2, 0), minute(3, 30), minute(4, 30)); !slices.Equal(got, want) {
				t.Errorf("ids %v, want %v: 00:03:00 cancelled, the new schedule's from 00:03:30", got, want)
			}
			if v := kafkatest.Values(target.Arrivals()); v["new"] != 2 {
				t.Errorf("values %v, want 2 of the new payload", v)
			}
		})
	})
	t.Run("a delete takes effect before the next occurrence", func(t *testing.T) {
		t.Parallel()
		inBubble(t, false, func(b *bubble) {
			b.run(b.cfg)
			target := b.collect("")
			b.schedule("s", []byte("v"), kdelay.HeaderSchedule, "0 * * * * *", kdelay.HeaderTarget, b.target)
			arrived(t, target, 2, 3*time.Minute)
			time.Sleep(10 * time.Second)
			b.schedule("s", nil)
			if got := arrived(t, target, 3, 5*time.Minute); len(got) != 2 {
				t.Errorf("ids %v, want the two before the delete only", got)
			}
		})
	})
	t.Run("count and until end a schedule", func(t *testing.T) {
		t.Parallel()
		inBubble(t, false, func(b *bubble) {
			b.run(b.cfg)
			target := b.collect("")
			b.schedule("counted", []byte("c"), kdelay.HeaderSchedule, "@every 1m", kdelay.HeaderTarget, b.target, kdelay.HeaderCount, "2")
			b.schedule("until", []byte("u"), kdelay.HeaderSchedule, "30 * * * * *", kdelay.HeaderTarget, b.target,
				kdelay.HeaderUntil, minute(2, 30).Format(time.RFC3339))
			got := arrived(t, target, 6, 6*time.Minute)
			if n := kafkatest.Values(target.Arrivals()); n["c"] != 2 || n["u"] != 3 {
				t.Errorf("delivered %v (%v), want c twice (count 2) and u three times (00:00:30 to until, 00:02:30)", n, got)
			}
		})
	})
}

// TestSchedulerRestart stops the scheduler between occurrences and starts
// another: no occurrence is skipped, none written twice.
func TestSchedulerRestart(t *testing.T) {
	t.Parallel()
	inBubble(t, false, func(b *bubble) {
		stop := b.run(b.cfg)
		target := b.collect("")
		b.schedule("s", []byte("v"), kdelay.HeaderSchedule, "@every 30s", kdelay.HeaderTarget, b.target)
		arrived(t, target, 2, 2*time.Minute)
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		b.run(b.cfg)
		got := arrived(t, target, 6, 4*time.Minute)
		if len(got) != 6 || hasDuplicates(got) || !consecutive(got, 30*time.Second) {
			t.Errorf("ids %v, want six occurrences 30s apart, each once", got)
		}
	})
}

// TestSchedulerCrash stops a scheduler between writing occurrences and
// writing their progress, as a SIGKILL would, and starts another with the
// same instance id, which fences it. At least once, the occurrences may be
// written twice, each with one id, and none is skipped. Exactly once, a
// read_committed reader of the ingress sees each once (the forwarder reads
// it so), and so does one of the target.
func TestSchedulerCrash(t *testing.T) {
	t.Parallel()
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			t.Parallel()
			inBubble(t, exactlyOnce, func(b *bubble) {
				target, ingress := b.collect(""), b.collect(b.cfg.WithDefaults().Topics.Ingress())
				crash, crashed := make(chan struct{}), make(chan struct{})
				first := b.cfg
				first.beforeProgress = func() {
					select {
					case <-crashed:
					default:
						close(crashed)
						<-crash // it writes nothing more while the other runs
					}
				}
				b.schedule("s", []byte("v"), kdelay.HeaderSchedule, "@every 30s", kdelay.HeaderTarget, b.target)
				s, err := New(first)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- s.Run(ctx) }()
				<-crashed
				b.run(b.cfg)
				distinct := func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) >= 5 }
				got := target.Until(4*time.Minute, distinct)
				close(crash)
				cancel()
				<-done // fenced: its error is expected
				ids := kafkatest.IDs(got)
				if len(ids) < 5 || !consecutive(slices.Collect(maps.Keys(ids)), 30*time.Second) {
					t.Errorf("ids %v, want five or more occurrences 30s apart, none skipped", ids)
				}
				written := kafkatest.IDs(ingress.Arrivals())
				t.Logf("delivered %v; written %v", ids, written)
				if !exactlyOnce {
					if !slices.ContainsFunc(slices.Collect(maps.Values(written)), func(n int) bool { return n > 1 }) {
						t.Errorf("written %v: no occurrence written twice, so the crash did not come between an occurrence and its progress", written)
					}
					return
				}
				for id, n := range ids {
					if n > 1 {
						t.Errorf("%s delivered %d times to a read_committed reader, want once", id, n)
					}
				}
				for id, n := range written {
					if n > 1 {
						t.Errorf("%s written %d times to the ingress as a read_committed reader sees it, want once", id, n)
					}
				}
			})
		})
	}
}

// TestSchedulerMissed stops every scheduler for five minutes: the latest
// missed occurrence is delivered once when one comes back, or none of them
// for a schedule that skips them.
func TestSchedulerMissed(t *testing.T) {
	t.Parallel()
	inBubble(t, false, func(b *bubble) {
		cfg := b.cfg
		cfg.Lookahead = time.Second
		stop := b.run(cfg)
		target := b.collect("")
		b.schedule("latest", []byte("l"), kdelay.HeaderSchedule, "0 * * * * *", kdelay.HeaderTarget, b.target)
		b.schedule("skip", []byte("s"), kdelay.HeaderSchedule, "0 * * * * *", kdelay.HeaderTarget, b.target, kdelay.HeaderMissed, "skip")
		arrived(t, target, 2, 2*time.Minute) // both at 00:01
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute) // 00:02 to 00:06 missed
		b.run(cfg)
		c := target.Until(90*time.Second, func([]kafkatest.Arrival) bool { return false })
		var got []string
		for _, a := range c {
			id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
			got = append(got, id)
		}
		want := append(ids("latest", minute(1, 0), minute(6, 0), minute(7, 0)), ids("skip", minute(1, 0), minute(7, 0))...)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("ids %v, want %v", got, want)
		}
	})
}

func hasDuplicates(ids []string) bool {
	return len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids)
}

// consecutive reports whether the occurrence ids, sorted, are every apart.
func consecutive(ids []string, every time.Duration) bool {
	var last time.Time
	for _, id := range slices.Sorted(slices.Values(ids)) {
		_, at, _ := strings.Cut(id, "@")
		t, err := time.Parse(time.RFC3339, at)
		if err != nil || !last.IsZero() && t.Sub(last) != every {
			return false
		}
		last = t
	}
	return true
}
