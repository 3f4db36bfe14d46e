package forwarder

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/stages"
)

// TestExactWakesOnlyForWork checks when an exact-mode forwarder's loop runs
// next: with nothing to do it sleeps until woken, which a new record does,
// instead of waking every CheckInterval (that cost most of an idle kdelay
// serve's CPU); with work it wakes when the work is due. The worker's client
// points at a closed port: a cycle only pauses and resumes partitions, which
// the client does in memory.
func TestExactWakesOnlyForWork(t *testing.T) {
	t.Parallel()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, InstanceID: "test", Logger: testLogger(t)}.WithDefaults()
	now := time.Now()
	level := func(t *testing.T) *worker {
		w, err := newWorker(&cfg, stage{level: "1h", topic: cfg.Topics.Level("1h"), group: stages.LevelGroup("", "1h"), wait: time.Hour}, 0, newOwners())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.cl.kafka.Close)
		return w
	}

	t.Run("nothing held", func(t *testing.T) {
		t.Parallel()
		if wake := level(t).cycle(now); !wake.IsZero() {
			t.Errorf("an idle forwarder wakes in %s, want only when a record arrives", wake.Sub(now))
		}
	})

	t.Run("head pending", func(t *testing.T) {
		t.Parallel()
		w := level(t)
		p := w.partition(0, 0)
		p.enqueue([]*kgo.Record{{Offset: 0, Timestamp: now.Add(-time.Minute)}})
		p.committed = 0 // where reading began, committed
		// Its only record is due in 59m: the partition resumes a lead ahead
		// of it, so that the records behind arrive before they are due.
		want := now.Add(59*time.Minute - w.resumeLead())
		if wake := w.cycle(now); !wake.Equal(want) {
			t.Errorf("with a head due in 59m the forwarder wakes in %s, want %s", wake.Sub(now), want.Sub(now))
		}
	})

	t.Run("handed on, not committed", func(t *testing.T) {
		t.Parallel()
		w := level(t)
		p := w.partition(0, 0)
		p.enqueue([]*kgo.Record{{Offset: 0, Timestamp: now.Add(-time.Hour)}})
		p.take() // produced, not yet acknowledged
		w.commits.last = now.Add(-300 * time.Millisecond)
		want := w.commits.last.Add(cfg.CommitInterval)
		if wake := w.cycle(now); !wake.Equal(want) {
			t.Errorf("with a record handed on the forwarder wakes in %s, want at the next commit, in %s", wake.Sub(now), want.Sub(now))
		}
	})
}

// TestSleepWakes checks what ends the loop's sleep: a wake-up (a fetch, a
// failed produce, enough acknowledged bytes, a nudge, a scan's end), one
// sent while the loop was busy, the timer at the wake time, the end of the
// context; and that with none of these it does not end. It runs in a synctest
// bubble: synctest.Wait returns once the sleeping goroutine is durably
// blocked, so "still asleep" is checked without waiting for time to pass.
func TestSleepWakes(t *testing.T) {
	t.Parallel()
	sleeper := func(t *testing.T, ctx context.Context, w *worker, wake time.Time) <-chan struct{} {
		t.Helper()
		done := make(chan struct{})
		timer := time.NewTimer(time.Hour)
		timer.Stop()
		go func() {
			defer close(done)
			w.sleep(ctx, timer, wake)
		}()
		return done
	}
	asleep := func(done <-chan struct{}) bool {
		synctest.Wait()
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	newSleeper := func() *worker { return &worker{wakeCh: make(chan struct{}, 1)} }

	t.Run("a wake-up ends it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newSleeper()
			done := sleeper(t, t.Context(), w, time.Time{})
			if !asleep(done) {
				t.Fatal("with nothing to do the loop woke, want it asleep")
			}
			w.wake()
			if asleep(done) {
				t.Error("after a wake-up the loop still sleeps, want it to run a cycle")
			}
		})
	})

	t.Run("a wake-up sent during a cycle is kept", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newSleeper()
			w.wake()
			w.wake() // one pending is enough: this one is dropped, not blocked on
			if asleep(sleeper(t, t.Context(), w, time.Time{})) {
				t.Error("a wake-up sent before the sleep did not end it, want it kept for the next sleep")
			}
		})
	})

	t.Run("the timer ends it at the wake time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newSleeper()
			start := time.Now()
			<-sleeper(t, t.Context(), w, start.Add(time.Minute))
			if slept := time.Since(start); slept != time.Minute {
				t.Errorf("slept %s, want until the wake time, 1m", slept)
			}
		})
	})

	t.Run("a failure pending is not slept on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newSleeper()
			w.inbox.failed = true // applied by the next cycle's applyAcks
			if asleep(sleeper(t, t.Context(), w, time.Time{})) {
				t.Error("with a failed produce not yet applied the loop sleeps, want a cycle now")
			}
		})
	})

	t.Run("acknowledged bytes reaching wakeAfter are not slept on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			w := newSleeper()
			w.inbox.wakeAfter, w.inbox.acked = 100, 100
			if asleep(sleeper(t, t.Context(), w, time.Time{})) {
				t.Error("with enough acknowledged to unfill the buffer the loop sleeps, want a cycle now")
			}
		})
	})

	t.Run("the end of the context ends it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			done := sleeper(t, ctx, newSleeper(), time.Time{})
			cancel()
			if asleep(done) {
				t.Error("after its context ended the loop still sleeps")
			}
		})
	})
}
