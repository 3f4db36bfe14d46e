package forwarder

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
)

// TestCommit checks that committing offsets never stands between a due
// record and its delivery, and that a partition the broker would not commit
// is logged with the broker's error.
func TestCommit(t *testing.T) {
	t.Parallel()

	t.Run("a slow commit does not delay a due record", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, []string{"1s", "2s"})
		if fx.cluster.Real() {
			t.Skip("needs kfake's Control to hold an OffsetCommit request; a real broker answers it at once")
		}
		// Only a commit sent after the first delivery is held. A commit held
		// from the start also holds what the client sends after it on the
		// same connection to the coordinator (Kafka answers a connection's
		// requests in order): the target's metadata, so the first delivery
		// waited for the commit's timeout, and heartbeats, so the group
		// could expire the member. The test then passed only because its
		// window began after that wait, and failed when the order differed.
		hold, holding, release := holdCommits(fx, stageGroup(fx.cfg, fx.cfg.Topics.Ingress()))
		arrived := fx.cluster.Collect(fx.target)
		f, _ := fx.start(fx.cfg)
		t.Cleanup(func() { close(release) }) // before the forwarder stops: cleanups run last first

		fx.send("first", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
		if got := arrived.Until(20*time.Second, atLeast(1)); len(got) < 1 {
			t.Fatal("the first record was not delivered within 20s")
		}
		hold.Store(true)
		select {
		case <-holding:
		case <-time.After(20 * time.Second):
			t.Fatal("the forwarder did not commit within 20s of delivering a record")
		}
		fx.send("second", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
		if got := arrived.Until(5*time.Second, atLeast(2)); len(got) < 2 {
			t.Errorf("a record due now was not delivered within 5s while a commit was in flight: the commit blocks delivery")
		}
		stats := make(chan Stats, 1)
		go func() { stats <- f.Stats() }()
		select {
		case <-stats:
		case <-time.After(5 * time.Second):
			t.Errorf("Stats did not return within 5s while a commit was in flight")
		}
	})

	t.Run("a revoke's commit does not hold back the partitions kept", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, []string{"1s", "2s"})
		if fx.cluster.Real() {
			t.Skip("needs kfake's Control to hold an OffsetCommit request; a real broker answers it at once")
		}
		hold, holding, release := holdCommits(fx, fx.cfg.Group)
		arrived := fx.cluster.Collect(fx.target)
		f, _ := fx.start(fx.cfg)

		// A commit of the ingress is held: the background one that follows
		// the second record.
		fx.send("first", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
		if got := arrived.Until(20*time.Second, atLeast(1)); len(got) < 1 {
			t.Fatal("the first record was not delivered within 20s")
		}
		hold.Store(true)
		fx.send("second", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
		if got := arrived.Until(20*time.Second, atLeast(2)); len(got) < 2 {
			t.Fatal("the second record was not delivered within 20s")
		}
		select {
		case <-holding:
		case <-time.After(20 * time.Second):
			t.Fatal("the forwarder did not commit within 20s of delivering a record")
		}
		// A rebalance that takes none of the ingress's partitions still has
		// its worker commit (stageCallbacks), which waits for the commit
		// held.
		var ingress *worker
		f.mu.Lock()
		for _, w := range f.workers {
			if w.source == fx.cfg.Topics.Ingress() {
				ingress = w
			}
		}
		f.mu.Unlock()
		revoked := make(chan struct{})
		go func() {
			defer close(revoked)
			ingress.onRevoked(context.Background(), nil)
		}()
		t.Cleanup(func() {
			close(release)
			<-revoked
		})

		fx.send("third", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
		if got := arrived.Until(5*time.Second, atLeast(3)); len(got) < 3 {
			t.Errorf("a record due now was not delivered within 5s while a revoke waited for a commit: the revoke holds the worker")
		}
		select {
		case <-revoked:
			t.Error("the revoke returned while the commit it waits for was held")
		default:
		}
	})

	t.Run("a partition the broker does not commit is logged with its error", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, []string{"1s", "2s"})
		if fx.cluster.Real() {
			t.Skip("needs kfake's Fault to fail one partition of an OffsetCommit")
		}
		group := stageGroup(fx.cfg, fx.cfg.Topics.Ingress())
		fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: group, Err: kerr.OffsetMetadataTooLarge})
		cfg := fx.cfg
		var logs *logBook
		cfg.Logger, logs = captureLogs(t)
		fx.start(cfg)

		fx.send("a", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
		line := logs.line(20*time.Second, "level=WARN", "msg=commit_failed", "topic="+fx.cfg.Topics.Ingress(), "partition=", "OFFSET_METADATA_TOO_LARGE")
		if line == "" {
			t.Errorf("no commit_failed warning naming the partition and OFFSET_METADATA_TOO_LARGE within 20s")
		}
		// The next commit carries the same offsets, and the broker takes it.
		if ok, committed, end := fx.committedAll(group, fx.cfg.Topics.Ingress(), 20*time.Second); !ok {
			t.Errorf("committed offsets %v, want the end offsets %v after the failed commit was repeated", committed, end)
		}
	})
}

// holdCommits has kfake hold every OffsetCommit of group while hold is set,
// until release is closed, and signal holding at each (it keeps one signal).
// Others it answers as usual.
func holdCommits(fx *fixture, group string) (hold *atomic.Bool, holding <-chan struct{}, release chan struct{}) {
	hold = new(atomic.Bool)
	held := make(chan struct{}, 1)
	release = make(chan struct{})
	fake := fx.cluster.Fake
	fake.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if hold.Load() && req.(*kmsg.OffsetCommitRequest).Group == group {
			select {
			case held <- struct{}{}:
			default:
			}
			fake.SleepControl(func() { <-release })
		}
		return nil, nil, false // then the broker answers it as usual
	})
	return hold, held, release
}
