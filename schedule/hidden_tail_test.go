package schedule

import (
	"context"
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
	dir := t.TempDir()
	start := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DataDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	topics := kdelay.Topics{}
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
	r, _, err := Record(kdelay.Rules{Topics: topics}, "beat", kdelay.ScheduleFields{Spec: "@every 1s", Target: "target"}, []byte("beat"), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("write the schedule: %v", err)
	}
	cl.Close()

	// A transaction left open in the partition, as by a process killed
	// before its commit.
	txn, err := kgo.NewClient(kgo.SeedBrokers(first.ListenAddrs()...), kgo.ProducerLinger(0),
		kgo.TransactionalID("killed"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	open := &kgo.Record{Topic: topics.Schedules(), Key: []byte("\x00beat"), Value: []byte("never committed")}
	if err := txn.ProduceSync(ctx, open).FirstErr(); err != nil {
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
	s := runScheduler(t, Config{Brokers: second.ListenAddrs(), InstanceID: "scheduler", ExactlyOnce: true, Partitions: 1, Logger: testLogger(t)})
	deadline := time.Now().Add(20 * time.Second)
	for s.Stats().Occurrences == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no occurrence written within 20s: the partition whose tail is an aborted transaction without its marker was not loaded (stats %+v)", s.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
