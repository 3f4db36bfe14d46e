package forwarder

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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

// deadNode dials as conns does, except to the address of a node told dead,
// whose dials are refused and whose connections it cut: a broker that died
// under its clients, still in their metadata.
type deadNode struct {
	conns
	addr atomic.Value // string
}

func (d *deadNode) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if host == d.addr.Load() {
		host = "127.0.0.1:1" // nothing listens there: connection refused
	}
	return d.conns.dial(ctx, network, host)
}

func (d *deadNode) kill(addr string) {
	d.addr.Store(addr)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, conn := range d.open {
		if conn.RemoteAddr().String() == addr {
			conn.Close()
		}
	}
}

// TestSessionOutlivesItsCoordinatorsNode: the node that coordinates the
// group dies, and the others answer FindCoordinator with
// COORDINATOR_NOT_AVAILABLE until the group has loaded elsewhere. A member's
// heartbeat asks a node, picked in turn, which one coordinates; a lookup
// that reached the dead node and then one more that failed ended the
// heartbeat, and with it the member's session, in seconds rather than after
// GroupRetryTimeout: its partitions lost, everything it had handed on since
// its last commit was delivered again (node-kill of the group coordinator,
// at-least-once, 3 nodes: 159 of 4,000 ids twice). franz-go retried a
// request on the next broker only when the lookup found one
// (third_party/franz-go, retryable.Request).
func TestSessionOutlivesItsCoordinatorsNode(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"}, kfake.NumBrokers(3))
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault and a node that dies under one client only; on a cluster, kdelay bench faults --scenarios node-kill --node-role group-coordinator")
	}
	var nodes deadNode
	ended := &sessionEnds{}
	cfg := fx.cfg
	// Long enough that the fake broker keeps the member through away and
	// the retries' backoff on a loaded machine: with the default 10s, 8s
	// away plus a second of backoff and CI's load ended the session at the
	// broker (UNKNOWN_MEMBER_ID), which is not what this test is about.
	cfg.SessionTimeout = 30 * time.Second
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.Dialer(nodes.dial), kgo.WithHooks(ended))
	fake := fx.cluster.Fake
	fx.start(cfg)
	beats := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Group: cfg.Group, Observe: true, Count: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := beats.Wait(ctx, 2); err != nil {
		t.Fatalf("the member did not heartbeat within 30s: %v", err)
	}

	// The coordinator's node dies; the group loads elsewhere after away.
	brokers, err := kadm.NewClient(fx.cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	coordinator := fake.CoordinatorFor(cfg.Group)
	var addr string
	for _, b := range brokers.Brokers {
		if b.NodeID == coordinator {
			addr = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	loading := fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.FindCoordinator}, Group: cfg.Group, Err: kerr.CoordinatorNotAvailable, Count: -1})
	nodes.kill(addr)
	const away = 8 * time.Second
	<-time.After(away) // the fault's schedule
	for fake.CoordinatorFor(cfg.Group) == coordinator {
		fake.RehashCoordinators()
	}
	loading.Remove()

	// Heartbeats reach the new coordinator: the member is still in its
	// session, or joined again if it lost it.
	after := beats.Hits()
	if err := beats.Wait(ctx, after+2); err != nil {
		t.Fatalf("the member did not heartbeat its new coordinator within 30s: %v", err)
	}
	beats.Remove()
	if n := ended.count.Load(); n > 0 {
		t.Fatalf("the member's group session ended %d times while its coordinator's node was down for %s (GroupRetryTimeout %s): %v",
			n, away, groupRetry(cfg.SessionTimeout), ended.last.Load())
	}
}

// sessionEnds counts the group sessions that ended in error in a client.
type sessionEnds struct {
	count atomic.Int64
	last  atomic.Value
}

func (s *sessionEnds) OnGroupManageError(err error) {
	s.count.Add(1)
	s.last.Store(err)
}
