package forwarder

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestExactlyOnceProducesWhileTheEndWaits: a transaction's end waits for
// its produces to be acknowledged, and a record that falls due meanwhile is
// produced into it rather than held back until the next one begins. On a
// replicated cluster a transaction's first produce to a partition takes a
// replicated write at the transaction coordinator before its own: 50 ms on
// 3 nodes against 8-14 ms without a transaction, and every stage waited
// that long at every end (docs/BENCHMARKS.md).
//
// Here the first target holds its produce until the test lets it go; a
// record for a second target, on another broker, is written once the end
// has begun, and must reach its broker while the first still waits.
func TestExactlyOnceProducesWhileTheEndWaits(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"}, kfake.NumBrokers(2))
	if fx.cluster.Real() {
		t.Skip("needs kfake's Control to hold a target's produce requests; a real broker answers them")
	}
	slow, fast := fx.target, fx.target+".fast"
	fx.cluster.CreateTopic(fast, 1, nil)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	slowAsked, fastAsked := make(chan struct{}), make(chan struct{})
	var slowOnce, fastOnce sync.Once
	fake := fx.cluster.Fake
	onProduce(fake, []string{slow, fast}, func(topic string) {
		if topic == fast {
			fastOnce.Do(func() { close(fastAsked) })
			return
		}
		slowOnce.Do(func() { close(slowAsked) })
		fake.SleepControl(func() { <-release })
	})

	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	// The end begins as soon as the first record is produced, so that the
	// second is written after it began.
	cfg.CommitLinger = time.Nanosecond
	ingress := cfg.Topics.Ingress()
	fx.cluster.CreateTopic(ingress, cfg.Partitions, nil)
	arrived := map[string]*kafkatest.Collector{}
	for _, target := range []string{slow, fast} {
		arrived[target] = fx.cluster.Collect(target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	fx.start(cfg)
	// The slow target leads on its own broker: on one broker its held
	// produce would hold every produce request behind it.
	placeLeaders(t, fake, map[string]placement{
		slow: {3, 1}, fast: {1, 0}, ingress: {cfg.Partitions, 0}, cfg.Topics.Level("1s"): {cfg.Partitions, 0},
	})
	t.Cleanup(unblock) // before the forwarder stops: cleanups run last first

	fx.send("slow", kdelay.HeaderTarget, slow, kdelay.HeaderDelay, "0", kdelay.HeaderID, "slow")
	select {
	case <-slowAsked:
	case <-time.After(30 * time.Second):
		t.Fatal("the first target was not asked to take its record within 30s")
	}
	fx.send("fast", kdelay.HeaderTarget, fast, kdelay.HeaderDelay, "0", kdelay.HeaderID, "fast")
	select {
	case <-fastAsked:
	case <-time.After(10 * time.Second):
		t.Fatal("a record due while the transaction's end waited for an earlier produce was not produced within 10s: the end holds every stage back")
	}
	unblock()
	for _, target := range []string{slow, fast} {
		got := kafkatest.IDs(arrived[target].Until(30*time.Second, atLeast(1)))
		if len(got) != 1 {
			t.Errorf("%s: %d records committed within 30s, want 1", target, len(got))
		}
		seenOnce(t, got)
	}
}
