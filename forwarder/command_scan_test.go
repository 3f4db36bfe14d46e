package forwarder

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// The scan tests put a record where a level's scan for an earlier run-now
// once missed it, and check it still arrives at once, not at the time its
// level would have released it (20 s later).

// runNow writes a run-now command for id and returns when it was written.
func (fx *fixture) runNow(id string) time.Time {
	fx.t.Helper()
	return fx.command(id, kdelay.CommandRunNow)
}

// command writes command name for id and returns when it was written.
func (fx *fixture) command(id, name string) time.Time {
	fx.t.Helper()
	r := &kgo.Record{Topic: fx.cfg.Topics.Control(), Key: []byte(id), Value: []byte{},
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderCommand, Value: []byte(name)}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fx.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		fx.t.Fatalf("write command: %v", err)
	}
	return r.Timestamp
}

// arrivesSoon fails unless id is the one record to arrive, within 10 s of
// since and before old, when its level would release it.
func arrivesSoon(t *testing.T, arrived *kafkatest.Collector, id string, since, old time.Time) {
	t.Helper()
	got := arrived.Until(30*time.Second, atLeast(1))
	switch {
	case len(got) != 1 || string(got[0].Value) != id:
		t.Fatalf("%d records arrived within 30s, want %s", len(got), id)
	case got[0].At.Sub(since) > 10*time.Second || !got[0].At.Before(old):
		t.Errorf("%s arrived %s after the run-now could act on it: at its old time, not moved ahead", id, got[0].At.Sub(since).Round(time.Millisecond))
	}
}

// TestRunNowHopLandsAfterScan holds the hop of a record on its way to the 20s
// level until the level has scanned for the run-now written meanwhile: the
// scan read the level's end before the broker had the hop, so it could not
// find it; the router, which learns the hop's place when the broker takes it,
// must move it ahead.
func TestRunNowHopLandsAfterScan(t *testing.T) {
	t.Parallel()
	for _, d := range []Delivery{AtLeastOnce, ExactlyOnce} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			fx := setup(t, []string{"1s", "20s"})
			if fx.cluster.Real() {
				t.Skip("needs kfake's Control to hold a produce request; a real broker answers it at once")
			}
			cfg := fx.cfg
			cfg.Delivery = d
			cfg.InstanceID = kafkatest.Name(t)
			cfg.Partitions = 1
			var logs *logBook
			cfg.Logger, logs = captureLogs(t)
			arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			fx.start(cfg)
			level := cfg.Topics.Level("20s")

			// The level must have fetched from its partition, or it would
			// not scan it yet (and would find the record later, in its
			// queue): a first record that stays there 20 s.
			fx.send("first", kdelay.HeaderTarget, fx.target+".other", kdelay.HeaderID, "first", kdelay.HeaderDelay, "40s")
			fx.cluster.Collect(level).Until(10*time.Second, atLeast(1))

			// Produce requests name topics by id since Kafka 4.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			topics, err := kadm.NewClient(fx.cl).ListTopics(ctx, level)
			if err != nil {
				t.Fatal(err)
			}
			levelID := topics[level].ID
			holding, release := make(chan struct{}), make(chan struct{})
			fake := fx.cluster.Fake
			fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				for _, tp := range req.(*kmsg.ProduceRequest).Topics {
					if tp.Topic == level || tp.TopicID == levelID {
						fake.DropControl() // the one hop held
						fake.SleepControl(func() { close(holding); <-release })
						break
					}
				}
				return nil, nil, false // then the broker takes it as usual
			})
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			sent := fx.send("late", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "late", kdelay.HeaderDelay, "40s")
			select {
			case <-holding:
			case <-time.After(10 * time.Second):
				t.Fatal("the hop of late to the 20s level was not produced within 10s")
			}
			fx.runNow("late")
			if logs.line(10*time.Second, "msg=scanned", "topic="+level) == "" {
				t.Fatalf("the 20s level did not scan for the run-now within 10s")
			}
			close(release)
			arrivesSoon(t, arrived, "late", time.Now(), sent.Timestamp.Add(20*time.Second))
		})
	}
}

// TestRunNowInUnfetchedPartition runs a command for a record in a partition
// of the level the level has fetched nothing from yet: here the record is in
// a transaction still open, so a read_committed fetch returns nothing. The
// level must scan every partition it owns, not only those it has fetched.
func TestRunNowInUnfetchedPartition(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "20s"})
	cfg := fx.cfg
	cfg.Partitions = 2
	var logs *logBook
	cfg.Logger, logs = captureLogs(t)
	arrived := fx.cluster.Collect(fx.target)
	fx.start(cfg)
	level := cfg.Topics.Level("20s")

	now := time.Now()
	first := levelRecord(cfg, "20s", fx.target+".other", "first", now, now.Add(40*time.Second))
	first.Partition = 0
	writer := fx.cluster.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := writer.ProduceSync(ctx, first).FirstErr(); err != nil {
		t.Fatalf("write to the level: %v", err)
	}
	txn := fx.cluster.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.TransactionalID(kafkatest.Name(t)))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	late := levelRecord(cfg, "20s", fx.target, "late", now, now.Add(40*time.Second))
	late.Partition = 1
	if err := txn.ProduceSync(ctx, late).FirstErr(); err != nil {
		t.Fatalf("write to the level in a transaction: %v", err)
	}
	// Partition 0 has a record to fetch, partition 1 none a read_committed
	// reader sees.
	fx.cluster.Collect(level, kgo.FetchIsolationLevel(kgo.ReadCommitted())).Until(10*time.Second, atLeast(1))
	fx.runNow("late")
	if logs.line(10*time.Second, "msg=scan_started", "topic="+level, "partitions=2") == "" {
		t.Errorf("the 20s level did not start a scan of both its partitions within 10s")
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	arrivesSoon(t, arrived, "late", time.Now(), now.Add(20*time.Second))
}
