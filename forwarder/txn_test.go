package forwarder

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// crash stops f as a SIGKILL would, as far as the broker can tell: every
// forwarder's client closes without ending its transaction or committing,
// so the broker holds the open transactions until a successor fences them.
// It returns once Run has returned.
func crash(t *testing.T, f *Forwarder, done <-chan struct{}) {
	t.Helper()
	f.mu.Lock()
	for _, w := range f.workers {
		w.cl.Close()
	}
	f.mu.Unlock()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its clients closing")
	}
}

// runUntilCrash starts a Forwarder whose end the test causes with crash.
func (fx *fixture) runUntilCrash(cfg Config) (*Forwarder, <-chan struct{}) {
	fx.t.Helper()
	f, err := New(cfg)
	if err != nil {
		fx.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx) // it fails, its clients closed under it
	}()
	fx.t.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-f.Ready():
	case <-time.After(30 * time.Second):
		fx.t.Fatal("forwarder not ready after 30s")
	}
	return f, done
}

// TestExactlyOnce kills the forwarder while records are in every stage (in
// the ingress, waiting in levels, held below the smallest level, in flight in
// an open transaction) and starts a new one with the same transactional id: a
// read_committed consumer of the target sees every record once, none early.
func TestExactlyOnce(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	// The default: transactions then stay open long enough to hold 20
	// records of this workload when it crashes; with 300ms they sometimes
	// did not, once exact mode stopped waking every CheckInterval and ended
	// each transaction right on time.
	cfg.CommitInterval = DefaultCommitInterval
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	f, done := fx.runUntilCrash(cfg)

	const n = 300
	rng := rand.New(rand.NewPCG(5, 6))
	due := map[string]time.Time{}
	for i := range n {
		d := time.Duration(rng.Int64N(int64(4 * time.Second)))
		id := strconv.Itoa(i)
		r := fx.send(id, kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, strconv.FormatInt(d.Milliseconds(), 10), kdelay.HeaderID, id)
		due[id] = r.Timestamp.Truncate(time.Millisecond).Add(d.Truncate(time.Millisecond))
	}
	// Crash once the open transactions hold records a read_committed
	// consumer has not seen, not right after a commit.
	inFlight := func(got []kafkatest.Arrival) bool {
		return len(got) >= n/3 && f.Stats().Delivered-f.Stats().Held >= int64(len(got))+20
	}
	if got := arrived.Until(30*time.Second, inFlight); !inFlight(got) {
		t.Fatalf("%d records seen and %d produced within 30s, want at least %d seen and 20 more in flight before the crash",
			len(got), f.Stats().Delivered-f.Stats().Held, n/3)
	}
	crash(t, f, done)
	seen := arrived.Arrivals()
	before := len(seen)
	var late []time.Duration
	for _, a := range seen {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		late = append(late, a.At.Sub(due[id]))
	}
	slices.Sort(late)
	t.Logf("lateness before the crash: p50 %s, p99 %s, max %s (commit-interval %s)",
		late[len(late)/2], late[len(late)*99/100], late[len(late)-1], cfg.CommitInterval)

	fx.start(cfg)
	got := arrived.Until(60*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	ids := kafkatest.IDs(got)
	if len(ids) != n {
		t.Fatalf("%d of %d records delivered within 60s of the restart", len(ids), n)
	}
	for id, times := range ids {
		if times > 1 {
			t.Errorf("record %s seen %d times by a read_committed consumer, want once", id, times)
		}
	}
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		if a.At.Before(due[id]) {
			t.Errorf("record %s arrived %s early", id, due[id].Sub(a.At))
		}
	}
	t.Logf("%d records, %d seen before the crash, %d produced by then", n, before, f.Stats().Delivered-f.Stats().Held)
}
