package schedule

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/forwarder/forwardertest"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

// TestExactlyOnceAbortWritesAgain: exactly-once, as kdelay serve runs it,
// the scheduler writes into the forwarders' transaction. When one of those
// transactions aborts (the broker refuses its offset commit), none of its
// occurrences count: the scheduler loads its partitions again and writes
// them in a later transaction. A read_committed consumer of the target then
// sees every occurrence of a schedule that fires each second once, from
// its first on, with no second missing. Outside a bubble: a forwarder's
// exactly-once commits stall in one (setup_test.go). kfake only: the
// broker's refusal is injected.
func TestExactlyOnceAbortWritesAgain(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	if cluster.Real() {
		t.Skip("the refused commit is injected with kfake's control")
	}
	name := kafkatest.Name(t)
	topics, target := kdelay.Topics{Prefix: name}, name+".target"
	cluster.CreateTopic(target, 3, nil)

	// The first commits of offsets of the schedules topic fail, which
	// aborts their transactions: a step's write carries them, and the
	// offsets-only commit after it (commitRead). Named by the topic's id,
	// as franz-go sends them to kfake (known once the forwarder made it).
	const refused = 3
	var failed atomic.Int32
	var schedulesID atomic.Pointer[[16]byte]
	fake := cluster.Fake
	fake.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		commit := req.(*kmsg.TxnOffsetCommitRequest)
		id := schedulesID.Load()
		if id == nil || failed.Load() >= refused || !slices.ContainsFunc(commit.Topics, func(rt kmsg.TxnOffsetCommitRequestTopic) bool {
			return rt.Topic == topics.Schedules() || rt.TopicID == *id
		}) {
			return nil, nil, false
		}
		failed.Add(1)
		return kafkatest.RefuseTxnOffsetCommit(commit, kerr.UnknownServerError.Code), nil, true
	})

	cfg := Config{Brokers: cluster.Brokers, Topics: topics, Group: name, InstanceID: "p", ExactlyOnce: true, AsReader: true,
		Lookahead: 3 * time.Second, Partitions: 3, Logger: testLogger(t)}
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	set, err := levels.Parse([]string{"1s", "10s"})
	if err != nil {
		t.Fatal(err)
	}
	forwardertest.Serve(t, forwarder.Config{Brokers: cluster.Brokers, Topics: topics, Group: name, Levels: set, Partitions: 3,
		InstanceID: "p", Delivery: forwarder.ExactlyOnce, Readers: []forwarder.Reader{s.Reader()}, Logger: testLogger(t)})
	md, err := kadm.NewClient(cluster.Client()).Metadata(context.Background(), topics.Schedules())
	if td, ok := md.Topics[topics.Schedules()]; err != nil || !ok || td.Err != nil {
		t.Fatalf("the schedules topic's metadata: %v %v", err, td.Err)
	} else {
		id := [16]byte(td.ID)
		schedulesID.Store(&id)
	}
	runUntilEnd(t, s)
	arrivals := kafkatest.Collect(t, cluster.Brokers, target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))

	// Its start (the record's time) 2 s ahead, so that the scheduler has
	// loaded its partitions before the first occurrence is due.
	start := time.Now().Add(2 * time.Second)
	first := start.Truncate(time.Millisecond).Truncate(time.Second).Add(time.Second)
	r, _, err := Record(kdelay.Rules{Topics: topics}, "tick", kdelay.ScheduleFields{Spec: "* * * * * *", Target: target}, []byte("t"), nil, start)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client().ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatalf("write the schedule: %v", err)
	}

	const want = 8
	got := arrivals.Until(40*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= want })
	if len(got) < want {
		t.Fatalf("%d occurrences delivered within 40s, want %d (stats %+v)", len(got), want, s.Stats())
	}
	var times []time.Time
	for _, a := range got {
		times = append(times, kafkatest.DeliverAt(t, a.Record))
	}
	slices.SortFunc(times, time.Time.Compare)
	if !times[0].Equal(first) {
		t.Errorf("the first occurrence delivered is at %s, want the schedule's first, at %s", times[0].Format(time.TimeOnly), first.Format(time.TimeOnly))
	}
	for i := 1; i < len(times); i++ {
		if d := times[i].Sub(times[i-1]); d != time.Second {
			t.Errorf("occurrences at %s and %s, %s apart: want each second once, none missing", times[i-1].Format(time.TimeOnly), times[i].Format(time.TimeOnly), d)
		}
	}

	// The test shows something only if an aborted transaction held an
	// occurrence: read uncommitted, the ingress then holds it twice, the
	// aborted copy and the one written again.
	if n := failed.Load(); n < refused {
		t.Fatalf("%d commits refused, want %d", n, refused)
	}
	twice := func(got []kafkatest.Arrival) bool {
		for _, n := range kafkatest.IDs(got) {
			if n > 1 {
				return true
			}
		}
		return false
	}
	ingress := kafkatest.Collect(t, cluster.Brokers, topics.Ingress(), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	if !twice(ingress.Until(10*time.Second, twice)) {
		t.Error("no occurrence is in the ingress twice read uncommitted: no aborted transaction held one, so the test showed nothing")
	}
}
