package main

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// failover is a group of `kdelay serve` processes under test, on kfake in
// this process or on the real cluster of KDELAY_TEST_BROKERS, with a steady
// trace of records due 300ms after they are written: below the smallest
// level, so that each stays in the ingress forwarder that read it and its
// lateness says how that forwarder kept up.
type failover struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	name    string
	target  string
	bin     string
	args    []string
	got     *kafkatest.Collector

	mu   sync.Mutex
	sent map[string]sentRecord // by kdelay-id
}

type sentRecord struct {
	partition int32 // of the ingress
	due       time.Time
}

const traceDelay = 300 * time.Millisecond

func setupFailover(t *testing.T, sessionTimeout time.Duration) *failover {
	t.Helper()
	if testing.Short() {
		t.Skip("starts several kdelay processes; skipped with -short")
	}
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	f := &failover{t: t, cluster: cluster, name: name, target: name + ".target", bin: binary(t), sent: map[string]sentRecord{}}
	cluster.CreateTopic(f.target, 6, nil)
	f.args = []string{"serve", "--brokers", strings.Join(cluster.Brokers, ","), "--topic-prefix", name, "--group", name,
		"--levels", "1s,2s,5s", "--partitions", "6", "--session-timeout", sessionTimeout.String(), "--log-level", "debug"}
	f.got = cluster.Collect(f.target)
	return f
}

// start starts `kdelay serve --instance-id id` and waits until it is ready.
func (f *failover) start(id string) *process {
	t := f.t
	t.Helper()
	return startServe(t, f.bin, append(f.args, "--instance-id", id)...)
}

// assignment waits until the ingress group is stable with the instance ids
// in want sharing all 6 partitions, and returns each one's partitions.
func (f *failover) assignment(want ...string) map[string][]int32 {
	f.t.Helper()
	adm := kadm.NewClient(f.cluster.Client())
	var got map[string][]int32
	ok := eventually(60*time.Second, func() bool {
		// At-least-once reads every stage with the group itself.
		got = ingressByInstance(adm, f.name, f.name+".ingress")
		total := 0
		for _, ps := range got {
			total += len(ps)
		}
		return total == 6 && len(got) == len(want) && !slices.ContainsFunc(want, func(id string) bool { return got[id] == nil })
	})
	if !ok {
		f.t.Fatalf("ingress group: partitions per instance %v, want %v sharing all 6", got, want)
	}
	return got
}

// trace writes one record to every ingress partition every 20ms until the
// returned func is called, which waits for it to stop.
func (f *failover) trace() (stop func()) {
	cl := f.cluster.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; {
			for p := range int32(6) {
				f.send(ctx, cl, p, strconv.Itoa(n))
				n++
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (f *failover) send(ctx context.Context, cl *kgo.Client, p int32, id string) {
	r := &kgo.Record{Topic: f.name + ".ingress", Partition: p, Value: []byte(id), Headers: []kgo.RecordHeader{
		{Key: kdelay.HeaderTarget, Value: []byte(f.target)},
		{Key: kdelay.HeaderDelay, Value: []byte(strconv.FormatInt(traceDelay.Milliseconds(), 10))},
		{Key: kdelay.HeaderID, Value: []byte(id)},
	}}
	cl.Produce(ctx, r, func(r *kgo.Record, err error) {
		if err != nil {
			return // cut short by the end of the trace: never sent
		}
		f.mu.Lock()
		f.sent[id] = sentRecord{partition: p, due: r.Timestamp.Truncate(time.Millisecond).Add(traceDelay)}
		f.mu.Unlock()
	})
}

// arrived waits until every record sent arrived, fails the test for any
// early or missing, and returns the first arrival of each.
func (f *failover) arrived() map[string]kafkatest.Arrival {
	f.t.Helper()
	f.mu.Lock()
	sent := maps.Clone(f.sent)
	f.mu.Unlock()
	got := f.got.Until(60*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) >= len(sent) })
	first := map[string]kafkatest.Arrival{}
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		if _, ok := first[id]; !ok {
			first[id] = a
		}
		if s, ok := sent[id]; ok && a.At.Before(s.due) {
			f.t.Errorf("record %s arrived %s before its due time", id, s.due.Sub(a.At))
		}
	}
	for id := range sent {
		if _, ok := first[id]; !ok {
			f.t.Errorf("record %s (ingress partition %d) never arrived", id, sent[id].partition)
		}
	}
	return first
}

// lateness returns the worst and median lateness of the records on
// partitions due within [from, to].
func (f *failover) lateness(first map[string]kafkatest.Arrival, partitions []int32, from, to time.Time) (worst, median time.Duration, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var late []time.Duration
	for id, s := range f.sent {
		a, ok := first[id]
		if !ok || !slices.Contains(partitions, s.partition) || s.due.Before(from) || s.due.After(to) {
			continue
		}
		late = append(late, a.At.Sub(s.due))
	}
	if len(late) == 0 {
		return 0, 0, 0
	}
	slices.Sort(late)
	return late[len(late)-1], late[len(late)/2], len(late)
}

// ingressByInstance returns the partitions of topic each instance id of a
// stable group is assigned.
func ingressByInstance(adm *kadm.Client, group, topic string) map[string][]int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil
	}
	g, ok := described[group]
	if !ok || g.Err != nil || g.State != "Stable" {
		return nil
	}
	per := map[string][]int32{}
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok || m.InstanceID == nil {
			continue
		}
		for _, t := range a.Topics {
			if t.Topic == topic {
				per[*m.InstanceID] = append(per[*m.InstanceID], t.Partitions...)
			}
		}
	}
	return per
}

// TestSurvivorKeepsDelivering: in a group of three, one kdelay is SIGKILLed
// and another stopped with SIGTERM while records fall due every 20ms on
// every partition. The one left keeps delivering its own partitions on time
// while the group waits for the killed one's session to expire, and takes
// over the others.
func TestSurvivorKeepsDelivering(t *testing.T) {
	t.Parallel()
	const session = 10 * time.Second
	f := setupFailover(t, session)
	a, b := f.start("a"), f.start("b")
	f.start("c")
	own := f.assignment("a", "b", "c")["c"]
	stop := f.trace()
	defer stop()
	if !eventually(30*time.Second, func() bool { return len(f.got.Arrivals()) >= 100 }) {
		t.Fatalf("only %d records delivered before the fault", len(f.got.Arrivals()))
	}

	change := time.Now()
	a.kill(t)
	if code, _ := b.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit code %d, want 0", code)
	}
	f.assignment("c")
	changed := time.Now()
	// Records due after the change too, so that the last ones due during it
	// are not the last the trace wrote.
	if !eventually(30*time.Second, func() bool { return !f.firstDueAfter(changed.Add(time.Second)).IsZero() }) {
		t.Fatal("no record delivered after the group changed")
	}
	stop()

	first := f.arrived()
	worst, median, n := f.lateness(first, own, change, changed)
	var moved []int32
	for p := range int32(6) {
		if !slices.Contains(own, p) {
			moved = append(moved, p)
		}
	}
	mworst, mmedian, mn := f.lateness(first, moved, change, changed)
	t.Logf("group change took %s; survivor's own partitions %v: %d records due during it, late p50 %s, max %s; partitions that moved: %d records, late p50 %s, max %s",
		changed.Sub(change).Round(time.Millisecond), own, n, median.Round(time.Millisecond), worst.Round(time.Millisecond),
		mn, mmedian.Round(time.Millisecond), mworst.Round(time.Millisecond))
	if n == 0 {
		t.Fatal("no record of the survivor's partitions was due during the change")
	}
	// Generous: a stall waits for the killed member's session (10s).
	if worst > session/2 {
		t.Errorf("the survivor delivered its own partitions up to %s late while the group changed, want under %s", worst, session/2)
	}
}

// TestRestartSameInstanceID: a kdelay SIGKILLed and started again at once
// with the same instance id, as systemd or Kubernetes would, resumes its
// partitions as soon as it is up, not after the session timeout of the
// process it replaces.
func TestRestartSameInstanceID(t *testing.T) {
	t.Parallel()
	const session = 45 * time.Second // long, so that waiting it out would show
	f := setupFailover(t, session)
	s := f.start("only")
	f.assignment("only")
	stop := f.trace()
	defer stop()
	if !eventually(30*time.Second, func() bool { return len(f.got.Arrivals()) >= 100 }) {
		t.Fatalf("only %d records delivered before the fault", len(f.got.Arrivals()))
	}

	s.kill(t)
	restarted := time.Now()
	f.start("only")
	ready := time.Now()
	// Resumed: a record due after the restart began has arrived.
	var back time.Time
	if !eventually(30*time.Second, func() bool {
		back = f.firstDueAfter(restarted)
		return !back.IsZero()
	}) {
		t.Fatalf("no record due after the restart delivered within 30s")
	}
	stop()
	first := f.arrived()
	worst, median, n := f.lateness(first, []int32{0, 1, 2, 3, 4, 5}, restarted.Add(-time.Second), ready.Add(time.Second))
	t.Logf("SIGKILL and restart with the same instance id (session timeout %s): ready %s after the start, delivering %s after it; %d records due around it late p50 %s, max %s",
		session, ready.Sub(restarted).Round(time.Millisecond), back.Sub(restarted).Round(time.Millisecond),
		n, median.Round(time.Millisecond), worst.Round(time.Millisecond))
	if took := back.Sub(restarted); took > 10*time.Second {
		t.Errorf("the restarted kdelay delivered again %s after it started, want under 10s (the session timeout is %s)", took, session)
	}
}

// firstDueAfter returns when the first record due after t arrived, or the
// zero time if none has.
func (f *failover) firstDueAfter(t time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var first time.Time
	for _, a := range f.got.Arrivals() {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		if s, ok := f.sent[id]; ok && s.due.After(t) && (first.IsZero() || a.At.Before(first)) {
			first = a.At
		}
	}
	return first
}

// TestSameInstanceIDFenced: a second kdelay started with the instance id of
// a running one, in the same group, takes its place; the one fenced stops
// with an error that names the setting to change, instead of the two taking
// the partitions from each other for ever.
func TestSameInstanceIDFenced(t *testing.T) {
	t.Parallel()
	f := setupFailover(t, 10*time.Second)
	first := f.start("twin")
	f.assignment("twin")
	second := f.start("twin")
	var fenced *process
	select {
	case <-first.exited:
		fenced = first
	case <-second.exited:
		fenced = second
	case <-time.After(60 * time.Second):
		t.Fatal("two kdelay with the same instance id both still running after 60s")
	}
	if code := fenced.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("the fenced kdelay exited with 0, want an error code")
	}
	for _, want := range []string{`InstanceID "twin"`, "--instance-id", "fenced"} {
		if !strings.Contains(fenced.out.String(), want) {
			t.Errorf("the fenced kdelay's output does not say %q:\n%s", want, fenced.out)
		}
	}
}
