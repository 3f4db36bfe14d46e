package forwarder

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/stages"
)

// TestExactWakesOnlyForWork checks when an exact-mode forwarder's loop runs
// next: with nothing to do it sleeps in its fetch, which a new record ends,
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
		w.lastCommit = now.Add(-300 * time.Millisecond)
		want := w.lastCommit.Add(cfg.CommitInterval)
		if wake := w.cycle(now); !wake.Equal(want) {
			t.Errorf("with a record handed on the forwarder wakes in %s, want at the next commit, in %s", wake.Sub(now), want.Sub(now))
		}
	})
}
