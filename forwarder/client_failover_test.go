package forwarder

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHeartbeatTriesForTheGroupRetryTimeout: while the group's coordinator
// does not answer, a member's heartbeat goes on trying for the whole
// GroupRetryTimeout, not for franz-go's 20 tries: with FailoverOpts'
// backoff (at most 1s) those ran out after about 17s, and the member gave
// its session up and joined again as a new one, its partitions lost,
// though the coordinator that took over would have kept it (a quorum's
// loss keeps a coordinator away for up to 30s: docs/RELIABILITY.md).
func TestHeartbeatTriesForTheGroupRetryTimeout(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault to refuse heartbeats; on a cluster, kdelay bench faults --scenarios quorum-loss")
	}
	cfg := fx.cfg
	// Long enough that the fake broker keeps the member while its
	// heartbeats are refused: GroupRetryTimeout is 60s with it.
	cfg.SessionTimeout = 60 * time.Second
	fx.cluster.CreateTopic(cfg.Topics.Ingress(), cfg.Partitions, nil)
	fx.start(cfg)
	// In its session: heartbeating.
	beats := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: cfg.Group, Observe: true, Count: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := beats.Wait(ctx, 2); err != nil {
		t.Fatalf("the member did not heartbeat within 30s: %v", err)
	}
	beats.Remove()

	joins := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.JoinGroup}, Group: cfg.Group, Observe: true, Count: -1})
	defer joins.Remove()
	refused := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: cfg.Group, Err: kerr.CoordinatorNotAvailable, Count: -1})
	const tries = 25 // more than franz-go's 20, in about 22s
	for deadline := time.Now().Add(45 * time.Second); refused.Hits() < tries; time.Sleep(50 * time.Millisecond) {
		if joins.Hits() > 0 {
			refused.Remove()
			t.Fatalf("the member joined its group again after %d refused heartbeats: it gave its session up before GroupRetryTimeout (60s)", refused.Hits())
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeats refused within 45s, want %d", refused.Hits(), tries)
		}
	}
	refused.Remove()
	if joins.Hits() > 0 {
		t.Errorf("the member joined its group again while its heartbeats were refused")
	}
}
