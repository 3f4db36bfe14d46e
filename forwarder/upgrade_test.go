package forwarder

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// offsets are committed offsets by topic and partition, as a test writes
// and reads them.
type offsets map[string]map[int32]int64

// upgradeFixture is a fleet's stage topics, two partitions each, with the
// old layout's groups of the fleet and the new group to take them over.
type upgradeFixture struct {
	*fixture
	adm  *kadm.Client
	logs *logBook
	u    upgrade
	// ingress and level are two of the stage topics; oldIngress and
	// oldLevel the groups the old layout read them with.
	ingress, level, oldIngress, oldLevel string
}

func setupUpgrade(t *testing.T) *upgradeFixture {
	t.Helper()
	fx := setup(t, []string{"1s", "1m"})
	view := fx.cfg.view()
	var topics []string
	for _, s := range view.Configured() {
		fx.cluster.CreateTopic(s.Topic, 2, nil)
		topics = append(topics, s.Topic)
	}
	log, logs := captureLogs(t)
	return &upgradeFixture{
		fixture: fx,
		adm:     kadm.NewClient(fx.cl),
		logs:    logs,
		u: upgrade{
			to:      fx.cfg.Group,
			from:    view.LegacyGroups(nil),
			topics:  topics,
			brokers: fx.cfg.Brokers,
			every:   50 * time.Millisecond,
			log:     log,
		},
		ingress:    fx.cfg.Topics.Ingress(),
		level:      fx.cfg.Topics.Level("1s"),
		oldIngress: IngressGroup(fx.cfg.Group),
		oldLevel:   LevelGroup(fx.cfg.Group, "1s"),
	}
}

// commit commits offs into group with no member, as kadm does (and as an
// old process's last commits stay once it left).
func (fx *upgradeFixture) commit(group string, offs offsets) {
	fx.t.Helper()
	os := kadm.Offsets{}
	for topic, ps := range offs {
		for p, at := range ps {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := fx.adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		fx.t.Fatalf("commit into %s: %v", group, err)
	}
}

// committed reads every offset group committed.
func (fx *upgradeFixture) committed(group string) offsets {
	fx.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := fx.adm.FetchOffsets(ctx, group)
	// kfake says a group that never committed does not exist; Kafka lists
	// no offsets.
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		fx.t.Fatalf("fetch offsets of %s: %v", group, err)
	}
	got := offsets{}
	resp.Each(func(o kadm.OffsetResponse) {
		if got[o.Topic] == nil {
			got[o.Topic] = map[int32]int64{}
		}
		got[o.Topic][o.Partition] = o.At
	})
	return got
}

// expect fails the test unless group committed exactly want.
func (fx *upgradeFixture) expect(group string, want offsets) {
	fx.t.Helper()
	got := fx.committed(group)
	if !maps.EqualFunc(got, want, maps.Equal) {
		fx.t.Errorf("group %s committed %v, want %v", group, got, want)
	}
}

// takeOver runs takeOver with a deadline and fails the test on its error.
func (fx *upgradeFixture) takeOver() {
	fx.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := takeOver(ctx, fx.adm, fx.u); err != nil {
		fx.t.Fatalf("takeOver: %v", err)
	}
}

// member joins group reading topic, and returns once the group assigned it
// partitions; leave makes it leave (Close sends LeaveGroup). It never
// commits by itself.
func (fx *upgradeFixture) member(group, topic string) (cl *kgo.Client, leave func()) {
	fx.t.Helper()
	assigned := make(chan struct{})
	var once sync.Once
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(fx.cfg.Brokers...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(assigned) }) }),
	)
	if err != nil {
		fx.t.Fatalf("new member of %s: %v", group, err)
	}
	var closeOnce sync.Once
	leave = func() { closeOnce.Do(cl.Close) }
	fx.t.Cleanup(leave)
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		fx.t.Fatalf("member of %s not assigned a partition within 30s", group)
	}
	return cl, leave
}

// TestTakeOver checks how a process of the one-group layout takes the old
// layout's committed offsets over.
func TestTakeOver(t *testing.T) {
	t.Parallel()
	t.Run("old offsets land in an empty group", func(t *testing.T) {
		t.Parallel()
		fx := setupUpgrade(t)
		fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 5, 1: 7}})
		fx.commit(fx.oldLevel, offsets{fx.level: {1: 3}})
		// The target topic is no stage topic: its offset stays behind.
		fx.commit(fx.oldLevel, offsets{fx.target: {0: 4}})
		fx.takeOver()
		fx.expect(fx.u.to, offsets{fx.ingress: {0: 5, 1: 7}, fx.level: {1: 3}})
		if l := fx.logs.line(0, "old_groups_taken_over", "partitions=3", "--delete --group "+fx.oldIngress); l == "" {
			t.Errorf("no old_groups_taken_over line with 3 partitions and the delete command of %s:\n%s", fx.oldIngress, fx.logs.buf.String())
		}
	})
	t.Run("higher offset kept, lower raised", func(t *testing.T) {
		t.Parallel()
		fx := setupUpgrade(t)
		fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 5, 1: 7}})
		fx.commit(fx.u.to, offsets{fx.ingress: {0: 9, 1: 2}})
		fx.takeOver()
		fx.expect(fx.u.to, offsets{fx.ingress: {0: 9, 1: 7}})
	})
	t.Run("the higher of two old groups on one partition", func(t *testing.T) {
		t.Parallel()
		fx := setupUpgrade(t)
		fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 5}})
		fx.commit(fx.oldLevel, offsets{fx.ingress: {0: 8}, fx.level: {0: 2}})
		fx.takeOver()
		fx.expect(fx.u.to, offsets{fx.ingress: {0: 8}, fx.level: {0: 2}})
	})
	t.Run("twice takes nothing the second time", func(t *testing.T) {
		t.Parallel()
		fx := setupUpgrade(t)
		fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 5, 1: 7}})
		fx.takeOver()
		want := offsets{fx.ingress: {0: 5, 1: 7}}
		fx.expect(fx.u.to, want)
		fx.takeOver()
		fx.expect(fx.u.to, want)
		if l := fx.logs.line(0, "old_groups_taken_over", "partitions=0"); l == "" {
			t.Errorf("the second takeover logged no old_groups_taken_over with partitions=0:\n%s", fx.logs.buf.String())
		}
	})
	t.Run("waits while an old group has a member", func(t *testing.T) {
		t.Parallel()
		fx := setupUpgrade(t)
		fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 5, 1: 7}})
		_, leave := fx.member(fx.oldIngress, fx.ingress)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- takeOver(ctx, fx.adm, fx.u) }()
		if l := fx.logs.line(30*time.Second, "waiting_for_old_layout", fx.oldIngress); l == "" {
			t.Fatalf("no waiting_for_old_layout line naming %s within 30s:\n%s", fx.oldIngress, fx.logs.buf.String())
		}
		select {
		case err := <-done:
			t.Fatalf("takeOver returned (%v) while %s had a member", err, fx.oldIngress)
		default:
		}
		fx.expect(fx.u.to, offsets{})
		leave()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("takeOver after the member left: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("takeOver still waiting 30s after the member of %s left", fx.oldIngress)
		}
		fx.expect(fx.u.to, offsets{fx.ingress: {0: 5, 1: 7}})
	})
	t.Run("gives up when ctx ends while an old group has a member", func(t *testing.T) {
		t.Parallel()
		fx := setupUpgrade(t)
		fx.commit(fx.oldLevel, offsets{fx.level: {0: 5}})
		fx.member(fx.oldLevel, fx.level)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := takeOver(ctx, fx.adm, fx.u)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("takeOver = %v, want the context's deadline", err)
		}
		fx.expect(fx.u.to, offsets{})
	})
	t.Run("waits while an old group has a transactional commit pending", func(t *testing.T) {
		t.Parallel()
		fx := setupUpgrade(t)
		fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 5}})
		end := fx.pendingTxnCommit(fx.oldIngress, offsets{fx.ingress: {0: 9}})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- takeOver(ctx, fx.adm, fx.u) }()
		if l := fx.logs.line(30*time.Second, "waiting_for_old_transactions", "UNSTABLE_OFFSET_COMMIT"); l == "" {
			t.Fatalf("no waiting_for_old_transactions line within 30s:\n%s", fx.logs.buf.String())
		}
		fx.expect(fx.u.to, offsets{})
		end(kgo.TryAbort) // as the transaction timeout does for a crashed process
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("takeOver after the transaction ended: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("takeOver still waiting 30s after the transaction ended")
		}
		fx.expect(fx.u.to, offsets{fx.ingress: {0: 5}})
	})
	t.Run("refused when the new group has a member", func(t *testing.T) {
		t.Parallel()
		fx := setupUpgrade(t)
		fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 5, 1: 7}})
		// A process of the new layout that joined without taking over
		// (it never would): the broker refuses a commit with no member id
		// into a group with members, kfake and Apache Kafka alike
		// (UNKNOWN_MEMBER_ID; see upgrade.go).
		cl, _ := fx.member(fx.u.to, fx.ingress)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var commitErr error
		cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{fx.ingress: {0: {Epoch: -1, Offset: 1}}},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				commitErr = err
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						commitErr = errors.Join(commitErr, kerr.ErrorForCode(p.ErrorCode))
					}
				}
			})
		if commitErr != nil {
			t.Fatalf("the member's commit: %v", commitErr)
		}
		fx.takeOver()
		fx.expect(fx.u.to, offsets{fx.ingress: {0: 1}})
		if l := fx.logs.line(0, "old_offsets_not_taken", "partitions=2", "UNKNOWN_MEMBER_ID"); l == "" {
			t.Errorf("no old_offsets_not_taken line with 2 partitions refused with UNKNOWN_MEMBER_ID:\n%s", fx.logs.buf.String())
		}
	})
}

// pendingTxnCommit commits offs into group in a transaction it leaves open,
// as an old process that crashed mid-transaction leaves its last commit
// until the transaction times out; end ends it.
func (fx *upgradeFixture) pendingTxnCommit(group string, offs offsets) (end func(kgo.TransactionEndTry)) {
	fx.t.Helper()
	cl := fx.cluster.Client(kgo.TransactionalID(group+".txn"), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		fx.t.Fatalf("begin transaction: %v", err)
	}
	// A record makes the client send EndTxn when it ends the transaction.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: fx.target, Value: []byte("x")}).FirstErr(); err != nil {
		fx.t.Fatalf("produce in the transaction: %v", err)
	}
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		fx.t.Fatalf("producer id: %v", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = group+".txn", id, epoch, group
	addResp, err := add.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		fx.t.Fatalf("add the offsets of %s to the transaction: %v", group, err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = group+".txn", group, id, epoch
	for topic, ps := range offs {
		// Version 6 names a topic by its id.
		details, err := fx.adm.ListTopics(ctx, topic)
		if err != nil {
			fx.t.Fatalf("list %s: %v", topic, err)
		}
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, details[topic].ID
		for p, at := range ps {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, at
			rt.Partitions = append(rt.Partitions, rp)
		}
		commit.Topics = append(commit.Topics, rt)
	}
	commitResp, err := commit.RequestWith(ctx, cl)
	for _, t := range commitResp.Topics {
		for _, p := range t.Partitions {
			err = errors.Join(err, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	if err != nil {
		fx.t.Fatalf("commit into %s in the transaction: %v", group, err)
	}
	return func(how kgo.TransactionEndTry) {
		fx.t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cl.EndTransaction(ctx, how); err != nil {
			fx.t.Fatalf("end the transaction: %v", err)
		}
	}
}

// TestUpgradeResumesWhereOldGroupsCommitted starts a Forwarder where the
// per-stage layout ran: it waits while a process of that layout is in its
// group, then resumes each partition where the old group committed, so
// nothing before is delivered again and nothing after is skipped. Then it
// switches to exactly-once, which reads with the same one group: it resumes
// where at-least-once left it, not where the old layout did.
func TestUpgradeResumesWhereOldGroupsCommitted(t *testing.T) {
	t.Parallel()
	fx := setupUpgrade(t)
	arrived := fx.cluster.Collect(fx.target)
	w := fx.cluster.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	write := func(from, to int) {
		for i := from; i < to; i++ {
			r := &kgo.Record{Topic: fx.ingress, Partition: 0, Value: []byte("r" + strconv.Itoa(i)),
				Headers: []kgo.RecordHeader{{Key: kdelay.HeaderTarget, Value: []byte(fx.target)}, {Key: kdelay.HeaderDelay, Value: []byte("0")}}}
			if err := w.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	write(0, 10)
	// The old layout delivered r0 to r5 and committed; one of its
	// processes still runs.
	fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 6, 1: 0}})
	_, leave := fx.member(fx.oldIngress, fx.ingress)

	f, err := New(fx.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	waitFor(t, 30*time.Second, "the forwarder to say it waits for the old layout", func() bool { return f.Waiting() != "" })
	if got := kafkatest.Values(arrived.Until(0, atLeast(1))); len(got) > 0 {
		t.Errorf("delivered %v while a process of the old layout ran", got)
	}
	if !strings.Contains(f.Waiting(), fx.oldIngress) {
		t.Errorf("Waiting() = %q, want the old group %s named", f.Waiting(), fx.oldIngress)
	}
	leave()
	select {
	case <-f.Ready():
	case err := <-done:
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the forwarder did not start within 60s of the old layout's process leaving")
	}
	expectValues(t, arrived.Until(30*time.Second, atLeast(4)), 6, 10)
	if ok, committed, _ := fx.committedAll(fx.cfg.Group, fx.ingress, 20*time.Second); !ok {
		t.Errorf("group %s committed %v on %s, want its end", fx.cfg.Group, committed, fx.ingress)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	// The old layout's groups are still at r6: taking them over again
	// must not move the one group back.
	write(10, 14)
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	_, stop := fx.start(cfg)
	defer stop()
	expectValues(t, arrived.Until(30*time.Second, atLeast(8)), 6, 14)
}

// expectValues fails the test unless got holds r<from> to r<to-1>, each
// once, and nothing else.
func expectValues(t *testing.T, got []kafkatest.Arrival, from, to int) {
	t.Helper()
	want := map[string]int{}
	for i := from; i < to; i++ {
		want["r"+strconv.Itoa(i)] = 1
	}
	if values := kafkatest.Values(got); !maps.Equal(values, want) {
		t.Errorf("delivered %v, want r%d to r%d once each", values, from, to-1)
	}
}

// TestUpgradeKeepsSkips: an exactly-once process of the per-stage layout
// committed, beside a partition's offset, the offsets above it it had handed
// on already (the skips, txn_skips.go), in the commit's metadata. The one
// group takes the metadata over with the offset, so the new process drops
// those records rather than deliver them a second time to a read_committed
// consumer.
func TestUpgradeKeepsSkips(t *testing.T) {
	t.Parallel()
	fx := setupUpgrade(t)
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	w := fx.cluster.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 8 {
		r := &kgo.Record{Topic: fx.ingress, Partition: 0, Value: []byte("r" + strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: kdelay.HeaderTarget, Value: []byte(fx.target)}, {Key: kdelay.HeaderDelay, Value: []byte("0")}}}
		if err := w.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// The old layout delivered r0 to r2, and r4 and r5 past r3, held.
	meta := encodeSkips(3, []int64{4, 5})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	os := kadm.Offsets{}
	os.Add(kadm.Offset{Topic: fx.ingress, Partition: 0, At: 3, LeaderEpoch: -1, Metadata: meta})
	if resp, err := fx.adm.CommitOffsets(ctx, fx.oldIngress, os); err != nil || resp.Error() != nil {
		t.Fatalf("commit into %s: %v %v", fx.oldIngress, err, resp.Error())
	}

	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	_, stop := fx.start(cfg)
	defer stop()
	if got := arrived.Until(30*time.Second, atLeast(3)); len(got) < 3 {
		t.Fatalf("%d records delivered within 30s, want r3, r6 and r7", len(got))
	}
	// A fourth would be r4 or r5 again: wait for it as long as for r6.
	got := kafkatest.Values(arrived.Until(5*time.Second, atLeast(4)))
	if want := map[string]int{"r3": 1, "r6": 1, "r7": 1}; !maps.Equal(got, want) {
		t.Errorf("delivered %v, want %v: r4 and r5 were handed on before the upgrade", got, want)
	}
}

// TestTakeOverRetries: a group request that fails with an error worth
// retrying, as a cluster answers before its offsets topic exists, is tried
// again rather than stopping the start.
func TestTakeOverRetries(t *testing.T) {
	t.Parallel()
	fx := setupUpgrade(t)
	if fx.cluster.Fake == nil {
		t.Skip("needs kfake's faults")
	}
	fx.commit(fx.oldIngress, offsets{fx.ingress: {0: 3}})
	fault := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeGroups}, Err: kerr.CoordinatorNotAvailable, Count: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- takeOver(ctx, fx.adm, fx.u) }()
	waitFor(t, 60*time.Second, "the retry to be logged", func() bool { return fx.logs.line(0, "old_layout_check_retried") != "" })
	fault.Remove()
	if err := <-done; err != nil {
		t.Fatalf("takeOver: %v", err)
	}
	fx.expect(fx.cfg.Group, offsets{fx.ingress: {0: 3}})
}
