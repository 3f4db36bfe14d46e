package forwarder

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay/kafkatest"
)

// TestExactlyOnceWaitsOutALeaderMoving: a target refuses produces with a
// retriable error for longer than the client's few retries and than
// ShutdownTimeout, as while its leader's node dies and another takes over
// (NOT_ENOUGH_REPLICAS, NOT_LEADER, refused connections: 9 s or more on a
// cluster). The open transaction waits for it and commits; it once gave up,
// aborted, and replayed every stage's work since the last commit, which
// then waited for the same leader: a broker's death cost exactly-once twice
// what it cost a plain producer (docs/RELIABILITY.md).
func TestExactlyOnceWaitsOutALeaderMoving(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault to refuse produces; on a cluster, kdelay bench faults --scenarios node-kill --node-role leader")
	}
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	cfg.ShutdownTimeout = time.Second
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	f, _ := fx.start(cfg)

	// More tries than the client's own (clientRetries), taking a few
	// seconds with its backoff: well within a transaction's timeout.
	moving := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: fx.target, Err: kerr.NotEnoughReplicas, Count: -1})
	const n = 10
	fx.sendDue(n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := moving.Wait(ctx, 2*clientRetries+2); err != nil {
		t.Fatalf("the target was not tried %d times within 30s: %v", 2*clientRetries+2, err)
	}
	moving.Remove()

	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	seenOnce(t, kafkatest.IDs(got))
	if ids := kafkatest.IDs(got); len(ids) != n {
		t.Errorf("%d of %d records delivered within 30s of the leader's move", len(ids), n)
	}
	if a := f.Stats().Aborted; a > 0 {
		t.Errorf("%d transactions aborted while the target's leader moved, want none: the replay pays for the move again", a)
	}
}
