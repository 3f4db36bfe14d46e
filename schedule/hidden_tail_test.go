package schedule

import (
	"context"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// TestHiddenTailLoads: a schedules partition whose last records are a
// transaction the broker aborted without an abort marker — what kdelay's
// embedded broker does, as it loads its data directory, with the
// transaction of a process SIGKILLed before it committed — is loaded all
// the same, and its schedules fire. A read_committed reader never sees
// those records, so a loader that waits to read a record at the last stable
// offset waits for ever.
func TestHiddenTailLoads(t *testing.T) {
	t.Parallel()
	broker := hiddenTail(t)
	s := runScheduler(t, Config{Brokers: broker.ListenAddrs(), InstanceID: "scheduler", ExactlyOnce: true, Partitions: 1, Logger: testLogger(t)})
	deadline := time.Now().Add(20 * time.Second)
	for s.Stats().Occurrences == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no occurrence written within 20s: the partition whose tail is an aborted transaction without its marker was not loaded (stats %+v)", s.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHiddenTailLists: List reads the same partition to its end and shows
// what is committed there: a schedule written plainly and one written in a
// committed transaction, not the replacement in the transaction aborted
// without its marker. A reader that waits to read a record at the last
// stable offset runs out its context instead.
func TestHiddenTailLists(t *testing.T) {
	t.Parallel()
	broker := hiddenTail(t)
	cl, err := kgo.NewClient(append(ListOpts(kdelay.Topics{}), kgo.SeedBrokers(broker.ListenAddrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ls, err := List(ctx, cl, kdelay.Rules{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := map[string]string{}
	for _, l := range ls {
		got[l.ID] = l.Schedule.Spec
	}
	want := map[string]string{"beat": "@every 1s", "daily": "@daily"}
	if !maps.Equal(got, want) {
		t.Errorf("List: got schedules %v, want %v", got, want)
	}
}

// hiddenTail starts a broker on a data directory whose schedules partition
// holds a schedule "beat" written plainly, a schedule "daily" written in a
// committed transaction, and last a replacement of "beat" in a transaction
// left open, as by a process SIGKILLed before its commit: the broker aborts
// that one as it loads the directory, without an abort marker, and puts the
// last stable offset at the high watermark.
func hiddenTail(t *testing.T) *kfake.Cluster {
	t.Helper()
	dir := t.TempDir()
	start := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	rules := kdelay.Rules{}
	topics := rules.Topics
	first := start()
	cl, err := kgo.NewClient(kgo.SeedBrokers(first.ListenAddrs()...), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	compact := "compact"
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, topics.Schedules()); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "target", topics.Ingress()); err != nil {
		t.Fatal(err)
	}
	record := func(id, spec string) *kgo.Record {
		r, _, err := Record(rules, id, kdelay.ScheduleFields{Spec: spec, Target: "target"}, []byte(id), nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := cl.ProduceSync(ctx, record("beat", "@every 1s")).FirstErr(); err != nil {
		t.Fatalf("write the schedule: %v", err)
	}
	cl.Close()

	txn, err := kgo.NewClient(kgo.SeedBrokers(first.ListenAddrs()...), kgo.ProducerLinger(0),
		kgo.TransactionalID("killed"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, record("daily", "@daily")).FirstErr(); err != nil {
		t.Fatalf("write in a transaction: %v", err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// A transaction left open, as by a process killed before its commit.
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, record("beat", "@every 1h")).FirstErr(); err != nil {
		t.Fatalf("write in the open transaction: %v", err)
	}
	// The data directory as a SIGKILL leaves it: copied while the broker
	// runs, before Close writes what it holds.
	crashed := t.TempDir()
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	first.Close()
	txn.Close()
	dir = crashed
	second := start() // aborts the open transaction as it loads dir
	t.Cleanup(second.Close)
	return second
}
