package forwarder

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kdelay/kdelay/stages"
)

// children is a parent context that counts the children registered on it
// and not yet released. context.WithCancel and WithDeadline register a child
// through AfterFunc when the parent has it and is no *cancelCtx (Value hides
// that), and release it when the child is cancelled: a child never cancelled
// stays registered, and reachable, for as long as the parent lives.
type children struct {
	context.Context
	live atomic.Int64
}

func (c *children) Value(any) any { return nil }

func (c *children) AfterFunc(f func()) (stop func() bool) {
	c.live.Add(1)
	stopFn := context.AfterFunc(c.Context, f)
	var once sync.Once
	return func() bool {
		once.Do(func() { c.live.Add(-1) })
		return stopFn()
	}
}

// TestPollReleasesItsContext checks that a poll leaves nothing registered
// on the run context: the loop polls on every wake-up for as long as the
// process runs, so anything a poll leaves behind grows without bound. The
// worker's client points at a closed port; a poll whose wake time has passed
// returns at once.
func TestPollReleasesItsContext(t *testing.T) {
	t.Parallel()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, InstanceID: "test", Logger: testLogger(t)}.WithDefaults()
	w, err := newWorker(&cfg, stage{level: "1h", topic: cfg.Topics.Level("1h"), group: stages.LevelGroup("", "1h"), wait: time.Hour}, 0, newOwners())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.cl.kafka.Close)
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := &children{Context: base}
	const polls = 100
	for range polls {
		if err := w.poll(run, time.Now()); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}
	if n := run.live.Load(); n != 0 {
		t.Errorf("after %d polls with a wake time, %d contexts are still registered on the run context, want 0", polls, n)
	}
}
