package forwarder

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// TestHoldEndsWhileATargetStalls: the ingress fills with records for a
// target that does not answer, so it holds the shared client's poll
// (pollHold) for acknowledgements that do not come. The hold must end, and
// the level go on fetching: a record written to the level meanwhile, for
// another target, is delivered while the first target still stalls. Once
// that target answers, every record of the burst is delivered.
//
// Two brokers: the stalled target's partitions lead on one, everything
// else on the other. On one broker the stall would hold every produce
// request behind it, the other target's too.
func TestHoldEndsWhileATargetStalls(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"}, kfake.NumBrokers(2))
	if fx.cluster.Real() {
		t.Skip("needs kfake's Control to hold the target's produce requests; a real broker answers them")
	}
	stalled, other := fx.target, fx.target+".other"
	fx.cluster.CreateTopic(other, 1, nil)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	stalledAsked := make(chan struct{})
	var askedOnce sync.Once
	fake := fx.cluster.Fake
	onProduce(fake, []string{stalled}, func(string) {
		askedOnce.Do(func() { close(stalledAsked) })
		fake.SleepControl(func() { <-release })
	})

	const (
		n     = 1_000
		share = 256 << 10 // per forwarder: the ingress and one level
	)
	cfg := fx.cfg
	cfg.MaxBufferedBytes = 2 * share
	ingress := cfg.Topics.Ingress()
	fx.cluster.CreateTopic(ingress, cfg.Partitions, nil)
	arrived := fx.cluster.Collect(other)
	f, _ := fx.start(cfg)
	placeLeaders(t, fake, map[string]placement{
		stalled: {3, 1}, other: {1, 0}, ingress: {cfg.Partitions, 0}, cfg.Topics.Level("1s"): {cfg.Partitions, 0},
	})
	t.Cleanup(unblock) // before the forwarder stops: cleanups run last first
	writeBurst(t, fx, ingress, n, func(int) kgo.RecordHeader { return kgo.RecordHeader{Key: kdelay.HeaderDelay, Value: []byte("0")} })
	select {
	case <-stalledAsked:
	case <-time.After(30 * time.Second):
		t.Fatal("the burst's target was not asked to take a record within 30s")
	}

	// Written to the level as the ingress would write it, due in 1s.
	const m = 10
	now := time.Now()
	level := fx.cluster.Client(kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range m {
		r := &kgo.Record{Topic: cfg.Topics.Level("1s"), Value: []byte("other"), Timestamp: now,
			Headers: kdelay.AppendHop([]kgo.RecordHeader(nil), other, "other-"+string(rune('a'+i)), now.Add(time.Second))}
		if err := level.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if got := arrived.Until(20*time.Second, atLeast(m)); len(got) < m {
		t.Fatalf("%d of %d records of the level delivered within 20s while the ingress's target stalled: the ingress held the poll for good", len(got), m)
	}
	unblock()
	if got := fx.cluster.Collect(stalled).Until(30*time.Second, atLeast(n)); len(got) < n {
		t.Errorf("%d of %d records of the burst delivered within 30s of its target answering again", len(got), n)
	}
	checkHeld(t, f, cfg.MaxBufferedBytes, cfg.Partitions)
}
