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

// pollSetup is a worker of the level of 1h whose client points at a closed
// port, and the poll loop of that client: a poll never brings records, and
// waits until its context ends.
func pollSetup(t *testing.T) (*worker, *pollLoop) {
	t.Helper()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}, InstanceID: "test", Logger: testLogger(t)}.WithDefaults()
	w, err := newWorker(&cfg, stage{level: "1h", topic: cfg.Topics.Level("1h"), group: stages.LevelGroup("", "1h"), wait: time.Hour}, 0, newOwners())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.cl.kafka.Close)
	return w, newPollLoop(w.cl, w.log, map[string]*worker{w.source: w}, nil, pollBurst(w.cl.kafka))
}

// TestPollReleasesItsContext checks that a poll leaves nothing registered
// on the run context: the poll loop polls for as long as the process runs,
// so anything a poll leaves behind grows without bound. Each poll here is
// cut short as a transaction's End cuts it (the gate has a holder), so it
// returns at once.
func TestPollReleasesItsContext(t *testing.T) {
	t.Parallel()
	_, l := pollSetup(t)
	l.cl.gate.holding = 1 // a holder on its way: no poll waits for records
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := &children{Context: base}
	const polls = 100
	for range polls {
		if err := l.pollOnce(run); err != nil {
			t.Fatalf("poll: %v", err)
		}
	}
	if n := run.live.Load(); n != 0 {
		t.Errorf("after %d polls, %d contexts are still registered on the run context, want 0", polls, n)
	}
}

// TestPollGate checks how a transaction's End stays apart from the poll
// loop: holding the gate ends the poll waiting for records, and the loop
// polls again once the holder releases it; the loop stops without an error
// when its context ends.
func TestPollGate(t *testing.T) {
	t.Parallel()
	_, l := pollSetup(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.run(ctx) }()

	// Twice: the second hold finds the loop polling again after the first.
	for i := range 2 {
		waitPolling(t, l.cl.gate)
		held := make(chan func(), 1)
		go func() { held <- l.cl.gate.hold() }()
		select {
		case release := <-held:
			// No poll is in the gate now (RWMutex): End may run.
			release()
		case err := <-done:
			t.Fatalf("hold %d: the poll loop stopped with %v, want it to wait at the gate", i, err)
		case <-time.After(10 * time.Second): // a deadline, not a wait for time to pass
			t.Fatalf("hold %d: not granted within 10s while the loop waits for records, want the wait cut short", i)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the poll loop stopped with %v when its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the poll loop did not stop within 10s of its context's end")
	}
}

// waitPolling waits, for at most 10s, until a poll is in the gate.
func waitPolling(t *testing.T, g *pollGate) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		g.mu.Lock()
		in := g.cancel != nil
		g.mu.Unlock()
		if in {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatal("no poll in the gate within 10s of the poll loop's start")
		}
	}
}
