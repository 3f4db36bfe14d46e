package forwarder

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay/kafkatest"
)

// The tests of third_party/franz-go's patches to GroupTransactSession, the
// session every exactly-once process ends its transactions with. They use
// the session directly, as kdelay's transaction loop does, so that the
// rebalance can be placed exactly where the patch matters.

// An End that waits for a join and sync in which the group took none of the
// member's partitions commits: franz-go built the offset commit with the
// generation before the rebalance, the group refused it, and End aborted,
// so at every step of a rolling restart each survivor replayed its open
// transaction once more than the rebalance asked for (issue 20).
func TestTxnCommitsAfterARebalanceThatTookNothing(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	in, other, out := name+".in", name+".other", name+".out"
	for _, topic := range []string{in, other, out} {
		cluster.CreateTopic(topic, 1, nil)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cluster.Client().ProduceSync(ctx, &kgo.Record{Topic: in, Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatalf("produce the record to consume: %v", err)
	}

	joins := &joinWrites{ch: make(chan struct{}, 16)}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(cluster.Brokers...),
		kgo.TransactionalID(name), kgo.ConsumerGroup(name), kgo.ConsumeTopics(in),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.WithHooks(joins))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.Begin(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	for polled := 0; polled == 0; {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatal("the session consumed nothing within a minute")
		}
		polled = fs.NumRecords()
	}
	if err := sess.ProduceSync(ctx, &kgo.Record{Topic: out, Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatalf("produce in the transaction: %v", err)
	}

	// A member of the same group that reads another topic, so the
	// balancer leaves the session's partition alone. It joins now, and
	// rejoins only when told: while it has not, the next rebalance holds
	// the session inside its join.
	late := newRawMember(t, cluster, name, other)
	late.join(ctx)
	joins.drain()

	// A third member starts a rebalance; the session rejoins at once.
	third := newRawMember(t, cluster, name, other)
	var joining sync.WaitGroup
	defer joining.Wait() // before the session leaves, which would start one more rebalance
	joining.Go(func() { third.join(ctx) })
	select {
	case <-joins.ch:
	case <-ctx.Done():
		t.Fatal("the session did not rejoin within a minute of a member joining")
	}

	// End reads the generation, then waits for the join and sync, which
	// complete once the late member rejoins.
	var once sync.Once
	prepared := func(*kmsg.TxnOffsetCommitRequest) error {
		once.Do(func() { joining.Go(func() { late.join(ctx) }) })
		return nil
	}
	committed, err := sess.End(kgo.PreTxnCommitFnContext(ctx, prepared), kgo.TryCommit)
	if err != nil {
		t.Fatalf("end: %v", err)
	}
	if !committed {
		t.Fatal("a transaction whose partition the rebalance left with its member was aborted")
	}
}

// A revoke after another, before the transaction ends, still reaches the
// session's user: upstream's wrapper dropped it, and kdelay's workers kept
// state for partitions the client no longer read (issue 20).
func TestTxnSessionTellsEveryRevoke(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	in := name + ".in"
	const partitions = 6
	cluster.CreateTopic(in, partitions, nil)

	var mu sync.Mutex
	var owned []int32 // the session's, as its callbacks say
	revokes := 0
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(cluster.Brokers...),
		kgo.TransactionalID(name), kgo.ConsumerGroup(name), kgo.ConsumeTopics(in),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			owned = append(owned, m[in]...)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			mu.Lock()
			defer mu.Unlock()
			if len(m[in]) > 0 {
				revokes++
			}
			owned = slices.DeleteFunc(owned, func(p int32) bool { return slices.Contains(m[in], p) })
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	// Polled once, the session joins; it ends no transaction after, so
	// the first revoke's failure stays set through the second.
	go sess.PollFetches(t.Context())
	ownedNow := func() []int32 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(owned))
	}

	if !within(30*time.Second, func() bool { return len(ownedNow()) == partitions }) {
		t.Fatalf("the session was not assigned the %d partitions within 30s: %v", partitions, ownedNow())
	}

	// Two members join one after the other: the session gives up half of
	// its partitions, then one more.
	members := make([]*ownedBy, 2)
	for i := range members {
		members[i] = &ownedBy{}
		cluster.Client(kgo.ConsumerGroup(name), kgo.ConsumeTopics(in),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.OnPartitionsAssigned(members[i].assigned))
		want := partitions / (i + 2)
		if !within(30*time.Second, func() bool { return members[i].count(in) > 0 && len(ownedNow()) == want }) {
			mu.Lock()
			n := revokes
			mu.Unlock()
			t.Fatalf("after member %d joined, the session's callbacks say it owns %v (%d revokes heard), want %d partitions",
				i+1, ownedNow(), n, want)
		}
	}
	for _, m := range members {
		for _, p := range m.partitions(in) {
			if slices.Contains(ownedNow(), p) {
				t.Errorf("partition %d is another member's, and the session was not told it lost it", p)
			}
		}
	}
}

// joinWrites tells of every JoinGroup a client writes.
type joinWrites struct{ ch chan struct{} }

func (j *joinWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.JoinGroup) {
		select {
		case j.ch <- struct{}{}:
		default:
		}
	}
}

func (j *joinWrites) drain() {
	for {
		select {
		case <-j.ch:
		default:
			return
		}
	}
}

// rawMember is a group member driven request by request, so that a test
// decides when it joins. It reads topic with the cooperative-sticky
// protocol; it never leads (the session joined first) and never heartbeats
// (its session timeout outlasts the test).
type rawMember struct {
	t       *testing.T
	cl      *kgo.Client
	group   string
	topic   string
	member  string
	timeout int32
}

func newRawMember(t *testing.T, cluster *kafkatest.Cluster, group, topic string) *rawMember {
	// A client of its own: a join waits for the whole group, and holds
	// the connection it was written on.
	return &rawMember{t: t, cl: cluster.Client(), group: group, topic: topic, timeout: 60_000}
}

// join joins or rejoins the group and syncs, waiting for the rebalance to
// complete. Called from a goroutine, it reports failure with Errorf.
func (m *rawMember) join(ctx context.Context) {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 1
	meta.Topics = []string{m.topic}
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = m.group, m.member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = m.timeout, m.timeout
		proto := kmsg.NewJoinGroupRequestProtocol()
		proto.Name, proto.Metadata = "cooperative-sticky", meta.AppendTo(nil)
		req.Protocols = append(req.Protocols, proto)
		resp, err := req.RequestWith(ctx, m.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == kerr.MemberIDRequired {
			m.member = resp.MemberID
			continue
		}
		if err != nil {
			m.t.Errorf("member of %s: join: %v", m.topic, err)
			return
		}
		m.member = resp.MemberID
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Group, sync.MemberID, sync.Generation = m.group, m.member, resp.Generation
		sync.ProtocolType, sync.Protocol = resp.ProtocolType, resp.Protocol
		sresp, err := sync.RequestWith(ctx, m.cl)
		if err == nil {
			err = kerr.ErrorForCode(sresp.ErrorCode)
		}
		if err != nil {
			m.t.Errorf("member of %s: sync: %v", m.topic, err)
		}
		return
	}
}

// ownedBy keeps what a member was assigned.
type ownedBy struct {
	mu sync.Mutex
	m  map[string][]int32
}

func (o *ownedBy) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string][]int32{}
	}
	for topic, ps := range m {
		o.m[topic] = append(o.m[topic], ps...)
	}
}

func (o *ownedBy) partitions(topic string) []int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.m[topic])
}

func (o *ownedBy) count(topic string) int { return len(o.partitions(topic)) }

// within polls cond until it holds or deadline passes, and reports
// whether it held.
func within(deadline time.Duration, cond func() bool) bool {
	for end := time.Now().Add(deadline); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
