package main

import (
	"context"
	"errors"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/schedule"
)

// TestScheduleKill runs `kdelay serve` with a schedule `@every 1s`,
// SIGKILLs it between writing an occurrence and writing the progress that
// re-arms the schedule past it, and starts it again at once with the same
// instance id, as systemd would. On kfake the kill is targeted: the broker
// kills serve as the scheduler's progress reaches it (at-least-once: the
// occurrence acknowledged, its progress never written) or as it commits
// the transaction of both (exactly-once: neither committed). On a real
// cluster (KDELAY_TEST_BROKERS), and on the embedded broker (`kdelay serve
// --data-dir`), which dies with serve and comes back from its data
// directory, the test kills serve as soon as it reads the next occurrence
// in the ingress: within the window only if the progress or the commit
// takes longer than that read, and the test says whether it did.
//
// What docs/SCHEDULES.md's Guarantees promise, checked on the ingress and
// on the target:
//   - never early: each occurrence arrives at its time or later;
//   - none lost: every occurrence from the first to 5 s past the last the
//     killed process wrote arrives (the restart comes well within the
//     lookahead, so nothing falls due while no kdelay can write it, and the
//     missed-occurrence policy does not apply);
//   - no fork: each process writes each occurrence at most once, and the
//     restarted one starts where the killed one's progress stopped, so only
//     the occurrences of the killed step are written twice, with the same
//     kdelay-id; at-least-once, those written only after the restart arrive
//     once each (the forwarder's own restart may repeat those it held);
//   - exactly once: a read_committed consumer of the target sees each
//     occurrence once.
func TestScheduleKill(t *testing.T) {
	t.Parallel()
	for _, embedded := range []bool{false, true} {
		for _, delivery := range []forwarder.Delivery{forwarder.AtLeastOnce, forwarder.ExactlyOnce} {
			name := string(delivery)
			if embedded {
				name = "embedded broker/" + name
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testScheduleKill(t, setupScheduleKill(t, delivery, embedded))
			})
		}
	}
}

func testScheduleKill(t *testing.T, k *scheduleKill) {
	k.start()
	sched := k.schedule("beat")
	if got := k.target.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= 3 }); len(got) < 3 {
		t.Fatalf("%d occurrences arrived within 30s of the schedule, want 3 before the kill", len(got))
	}
	killedAt := k.kill()
	k.start()

	// The killed process wrote its occurrences up to lookahead ahead; once
	// the restarted one writes, wait for 5 s of those only it wrote.
	var w written
	if !eventually(60*time.Second, func() bool { w = k.writtenBy(killedAt); return len(w.after) > 0 }) {
		t.Fatal("the restarted process wrote no occurrence within 60s")
	}
	lastA := slices.MaxFunc(slices.Collect(maps.Keys(w.before)), time.Time.Compare)
	end := lastA.Add(5 * time.Second)
	var want []string
	for at := sched.Next(sched.Start); !at.After(end); at = sched.Next(at) {
		want = append(want, kdelay.OccurrenceID("beat", at))
	}
	// The schedule goes on firing: a duplicate of one of want would
	// arrive on time, so 2 s past the last of them it would be in.
	got := k.target.Until(time.Until(end)+30*time.Second, func(got []kafkatest.Arrival) bool {
		ids := kafkatest.IDs(got)
		return !slices.ContainsFunc(want, func(id string) bool { return ids[id] == 0 }) && time.Now().After(end.Add(2*time.Second))
	})
	k.check(t, want, got, k.writtenBy(killedAt), killedAt)
}

// check asserts the guarantees of TestScheduleKill on what the target
// received (got) and what each process wrote into the ingress.
func (k *scheduleKill) check(t *testing.T, want []string, got []kafkatest.Arrival, w written, killedAt time.Time) {
	t.Helper()
	copies := kafkatest.IDs(got)
	var latest time.Duration
	var latestID string
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		due := kafkatest.DeliverAt(t, a.Record)
		if late := a.At.Sub(due); late > latest {
			latest, latestID = late, id
		}
		if kdelay.OccurrenceID("beat", due) != id {
			t.Errorf("delivered kdelay-id %q with kdelay-deliver-at %s, want beat@<that time>", id, due.UTC())
		}
		if a.At.Before(due) {
			t.Errorf("%s arrived %s before its time", id, due.Sub(a.At))
		}
	}
	t.Logf("the latest occurrence: %s, %s late", latestID, latest.Round(time.Millisecond))
	lastA := slices.MaxFunc(slices.Collect(maps.Keys(w.before)), time.Time.Compare)
	for _, id := range want {
		at := occurrenceTime(t, id)
		n := copies[id]
		switch {
		case n == 0:
			t.Errorf("%s (due %s after the kill) never arrived", id, at.Sub(killedAt).Round(time.Millisecond))
		case n > 1 && k.exactlyOnce:
			t.Errorf("%s (due %s after the kill) arrived %d times, want once: exactly once", id, at.Sub(killedAt).Round(time.Millisecond), n)
		case n > 1 && at.After(lastA):
			t.Errorf("%s (due %s after the kill) arrived %d times, want once: written only after the restart", id, at.Sub(killedAt).Round(time.Millisecond), n)
		}
	}
	// In the ingress, read uncommitted: what each process wrote.
	for name, by := range map[string]map[time.Time]int{"killed": w.before, "restarted": w.after} {
		for at, n := range by {
			if n > 1 {
				t.Errorf("the %s process wrote %s %d times, want at most once", name, kdelay.OccurrenceID("beat", at), n)
			}
		}
	}
	if len(w.after) == 0 {
		t.Fatal("the restarted process wrote no occurrence")
	}
	firstB := slices.MinFunc(slices.Collect(maps.Keys(w.after)), time.Time.Compare)
	var twice []time.Time
	for at := range w.after {
		if w.before[at] > 0 {
			twice = append(twice, at)
		}
	}
	slices.SortFunc(twice, time.Time.Compare)
	if firstB.After(lastA.Add(time.Second)) {
		t.Errorf("the restarted process began at %s, the killed one stopped at %s: occurrences in between skipped", firstB.UTC(), lastA.UTC())
	}
	for at := firstB; !at.After(lastA); at = at.Add(time.Second) {
		if w.before[at] == 0 || w.after[at] == 0 {
			t.Errorf("%s written by the killed process %d times and by the restarted one %d times: want both to have written what the restarted one wrote again (it starts at %s, where the killed one's progress stopped)",
				kdelay.OccurrenceID("beat", at), w.before[at], w.after[at], firstB.UTC())
		}
	}
	t.Logf("killed at %s; the killed process wrote to %s, the restarted one from %s; written by both: %v",
		killedAt.UTC().Format(time.RFC3339Nano), lastA.UTC(), firstB.UTC(), twice)
	if k.targeted && len(twice) == 0 {
		t.Errorf("no occurrence written by both processes: the kill did not land between an occurrence and its progress, which is what the test is for")
	}
}

// scheduleKill is one `kdelay serve` at a time with a schedule, and what it
// writes: the ingress read uncommitted, the target read_committed.
type scheduleKill struct {
	t           *testing.T
	cluster     *kafkatest.Cluster
	name        string
	args        []string
	exactlyOnce bool
	targeted    bool // the broker is kfake, which kills serve at the moment wanted
	ingress     *kafkatest.Collector
	target      *kafkatest.Collector

	schedulesID [16]byte // the schedules topic's id, which produce v13 names it by; set before armed
	armed       atomic.Bool
	killed      chan time.Time
	serve       *process
	mu          sync.Mutex // guards serve: the kill comes from kfake's goroutine
}

// lookahead is serve's schedule-lookahead in TestScheduleKill: the test
// waits for what the killed process wrote that far ahead. A restart under a
// busy CI takes seconds (on Kafka the group's initial rebalance delay alone
// is 3 s).
const lookahead = 30 * time.Second

func setupScheduleKill(t *testing.T, delivery forwarder.Delivery, embedded bool) *scheduleKill {
	t.Helper()
	if testing.Short() {
		t.Skip("starts, kills and restarts kdelay serve for half a minute; skipped with -short")
	}
	name := kafkatest.Name(t)
	k := &scheduleKill{t: t, name: name, exactlyOnce: delivery == forwarder.ExactlyOnce, killed: make(chan time.Time, 1)}
	k.args = []string{"serve", "--topic-prefix", name, "--group", name, "--levels", "1s,2s,5s", "--partitions", "3",
		"--delivery", string(delivery), "--instance-id", "sched", "--log-level", "debug",
		"--schedule-lookahead", lookahead.String()}
	if embedded {
		if os.Getenv(kafkatest.EnvBrokers) != "" {
			t.Skip("about the embedded broker; this run uses KDELAY_TEST_BROKERS")
		}
		// The same address and data directory across the kill: the
		// broker dies with serve and comes back with what it had written.
		k.args = append(k.args, "--listen", closedPort(t), "--data-dir", t.TempDir())
		return k // connected once serve has started its broker
	}
	k.connect(kafkatest.New(t))
	k.cluster.DeleteOnCleanup(name)
	k.args = append(k.args, "--brokers", strings.Join(k.cluster.Brokers, ","))
	if k.targeted = k.cluster.Fake != nil; k.targeted {
		k.killAtProgress()
	}
	return k
}

// connect creates the target on cluster and starts reading the ingress and
// the target.
func (k *scheduleKill) connect(cluster *kafkatest.Cluster) {
	k.cluster = cluster
	cluster.CreateTopic(k.name+".target", 3, nil)
	k.ingress = cluster.Collect(k.topics().Ingress())
	k.target = cluster.Collect(k.name+".target", kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}

func (k *scheduleKill) topics() kdelay.Topics { return kdelay.Topics{Prefix: k.name} }

func (k *scheduleKill) start() {
	p := startServe(k.t, binary(k.t), k.args...)
	k.mu.Lock()
	k.serve = p
	k.mu.Unlock()
	if k.cluster == nil {
		k.connect(kafkatest.At(k.t, strings.Split(p.brokers, ",")))
	}
}

// schedule writes schedule id, @every 1s, into the schedules topic once
// serve has created it, and returns it as kdelay reads it.
func (k *scheduleKill) schedule(id string) kdelay.Schedule {
	t := k.t
	t.Helper()
	// Written before the scheduler has loaded its partitions (on Kafka its
	// group first waits group.initial.rebalance.delay.ms, 3 s), the first
	// occurrences would fall due before any kdelay could write them, and
	// the missed-occurrence policy deliver only the latest of them: true,
	// but not what this test is about. Each partition of the schedules
	// topic (--partitions 3) logs its loading.
	if !eventually(30*time.Second, func() bool { return strings.Count(k.serve.out.String(), "msg=schedules_loaded") >= 3 }) {
		t.Fatalf("the scheduler did not load the 3 partitions of %s within 30s", k.topics().Schedules())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kadm.NewClient(k.cluster.Client()).Metadata(ctx, k.topics().Schedules())
	if err != nil {
		t.Fatal(err)
	}
	k.schedulesID = md.Topics[k.topics().Schedules()].ID
	r, sched, err := schedule.Record(kdelay.Rules{Topics: k.topics()}, id,
		kdelay.ScheduleFields{Spec: "@every 1s", Target: k.name + ".target"}, []byte("beat"), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// franz-go's default partitioner is Kafka's, murmur2 of the key.
	if err := k.cluster.Client().ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("write the schedule: %v", err)
	}
	return sched
}

// kill SIGKILLs serve, and returns when. On kfake it arms the broker to do
// it (killAtProgress) and waits for it.
func (k *scheduleKill) kill() time.Time {
	t := k.t
	t.Helper()
	if !k.targeted {
		// As soon as the next occurrence is in the ingress: its progress
		// (at-least-once) or its commit (exactly-once) may not be yet.
		seen := len(k.ingress.Arrivals())
		k.ingress.Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(got) > seen })
		k.mu.Lock()
		k.serve.kill(t)
		k.mu.Unlock()
		return time.Now()
	}
	k.armed.Store(true)
	select {
	case at := <-k.killed:
		k.mu.Lock()
		defer k.mu.Unlock()
		select {
		case <-k.serve.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("kdelay serve still running 10s after SIGKILL")
		}
		return at
	case <-time.After(20 * time.Second):
		t.Fatal("the scheduler wrote no progress within 20s of arming the kill")
		return time.Time{}
	}
}

// killAtProgress makes kfake SIGKILL serve, once armed, as the scheduler's
// step reaches its end, and drop the request instead of taking it:
// at-least-once, the produce of the progress, sent once the occurrences it
// counts were acknowledged; exactly-once, the commit of the transaction
// that holds both (the forwarders' transaction, which the scheduler writes
// into since 2026-11-30).
func (k *scheduleKill) killAtProgress() {
	fake := k.cluster.Fake
	schedules := k.topics().Schedules()
	var progressIn sync.Map // transactional ids whose open transaction wrote progress
	fake.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !k.armed.Load() {
			return nil, nil, false
		}
		hit := false
		switch req := req.(type) {
		case *kmsg.ProduceRequest:
			progress := false
			for _, rt := range req.Topics {
				progress = progress || rt.Topic == schedules || rt.TopicID == k.schedulesID
			}
			switch {
			case !k.exactlyOnce:
				hit = progress
			case progress && req.TransactionID != nil:
				progressIn.Store(*req.TransactionID, true)
			}
		case *kmsg.EndTxnRequest:
			_, progress := progressIn.LoadAndDelete(req.TransactionalID)
			hit = k.exactlyOnce && req.Commit && progress
		}
		if !hit || !k.armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		k.mu.Lock()
		err := k.serve.cmd.Process.Kill()
		k.mu.Unlock()
		if err != nil {
			k.t.Errorf("SIGKILL: %v", err)
		}
		k.killed <- time.Now()
		return nil, errors.New("killed"), true // closes the connection: the request is dropped
	})
}

// written is what each process wrote into the ingress: occurrences by
// their time, and how many times.
type written struct{ before, after map[time.Time]int }

// writtenBy splits the occurrences in the ingress, read uncommitted (a
// killed transaction's included), into those written before the kill and
// after, by the record's timestamp: the scheduler sets it when it writes.
func (k *scheduleKill) writtenBy(killedAt time.Time) written {
	w := written{before: map[time.Time]int{}, after: map[time.Time]int{}}
	for _, a := range k.ingress.Arrivals() {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		at := occurrenceTime(k.t, id)
		if a.Timestamp.Before(killedAt) {
			w.before[at]++
		} else {
			w.after[at]++
		}
	}
	return w
}

// occurrenceTime is the time in an occurrence id, "<schedule>@<RFC 3339>".
func occurrenceTime(t *testing.T, id string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, id[strings.IndexByte(id, '@')+1:])
	if err != nil {
		t.Fatalf("kdelay-id %q: not <schedule>@<RFC 3339>: %v", id, err)
	}
	return at
}
