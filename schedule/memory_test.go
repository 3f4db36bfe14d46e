package schedule

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// maxScheduleBytes is the live heap a schedule in force may cost the
// process that owns it: its slot in the index (index.go), whatever its
// value, headers and spec, which stay in the topic and are read back when
// an occurrence is written. A million schedules cost a million times this
// (docs/SCHEDULES.md states the bound). Until the index, a schedule here
// cost 650 to 680 bytes: its value, headers and parsed spec in memory.
const maxScheduleBytes = boundBytes

// TestScheduleMemory loads schedules from the schedules topic, as a
// process that takes its partitions does, and holds the live heap each one
// costs, and what Stats says the index holds.
//
// Not parallel: the heap is the process's, and a test running beside this
// one would count in it.
func TestScheduleMemory(t *testing.T) {
	const n = 50_000
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	cfg := Config{Brokers: cluster.Brokers, Topics: kdelay.Topics{Prefix: name}, Group: name, InstanceID: "memory", Partitions: 1}
	writeSchedules(t, cluster, cfg.Topics, n)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := runScheduler(t, cfg)
	deadline := time.Now().Add(time.Minute)
	for s.Stats().Schedules < n && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // a deadline-bounded poll
	}
	if got := s.Stats().Schedules; got != n {
		t.Fatalf("%d schedules in force a minute after the scheduler started, want %d", got, n)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%d schedules in force: %.0f bytes of live heap each", n, per)
	if per > maxScheduleBytes {
		t.Errorf("a schedule in force costs %.0f bytes of live heap, more than %d: a million would cost %.0f MB. Keep what a slot does not hold in the topic, read back when it is needed (plan.go)",
			per, maxScheduleBytes, per)
	}
	if held := float64(s.Stats().IndexBytes) / n; held > maxScheduleBytes {
		t.Errorf("Stats().IndexBytes says %.0f bytes a schedule, more than %d", held, maxScheduleBytes)
	}
	runtime.KeepAlive(s)
}

// writeSchedules writes n schedules into topics' schedules topic, which it
// creates with one partition: a daily cron twelve hours away, so that none
// writes an occurrence, a value of 100 bytes and a header of the user's.
func writeSchedules(t *testing.T, cluster *kafkatest.Cluster, topics kdelay.Topics, n int) {
	t.Helper()
	writeSchedulesIn(t, cluster, topics, n, 1)
}

// writeSchedulesIn is writeSchedules into a topic of partitions partitions,
// each schedule where Kafka's default partitioner puts its id.
func writeSchedulesIn(t *testing.T, cluster *kafkatest.Cluster, topics kdelay.Topics, n int, partitions int32) {
	t.Helper()
	cluster.CreateTopic(topics.Schedules(), partitions, map[string]*string{"cleanup.policy": ptr("compact")})
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close() // before the heap is read: its buffers are not the scheduler's
	now := time.Now()
	at := now.UTC().Add(12 * time.Hour)
	f := kdelay.ScheduleFields{Spec: fmt.Sprintf("0 %d %d * * *", at.Minute(), at.Hour()), Target: "memory-target"}
	rules := kdelay.Rules{Topics: topics, MaxDelay: kdelay.DefaultMaxDelay}
	value := make([]byte, 100)
	user := []kgo.RecordHeader{{Key: "source", Value: []byte("memory-test")}}
	for i := range n {
		r, _, err := Record(rules, "schedule-"+strconv.Itoa(i), f, value, user, now)
		if err != nil {
			t.Fatal(err)
		}
		cl.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("write a schedule: %v", err)
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDetach: a schedule's value and headers are its own copy, equal to
// what was read, a null header still null, and none shares the fetched
// record's memory.
func TestDetach(t *testing.T) {
	t.Parallel()
	batch := []byte("value|a|")
	hs := []kgo.RecordHeader{{Key: "a", Value: batch[6:7]}, {Key: "null"}, {Key: "empty", Value: batch[8:]}}
	value, got := detach(batch[:5], hs)
	for i := range batch {
		batch[i] = 'x' // the batch reused, as a fetch buffer is
	}
	if string(value) != "value" || len(got) != 3 || got[0].Key != "a" || string(got[0].Value) != "a" ||
		got[1].Key != "null" || got[1].Value != nil || got[2].Key != "empty" || got[2].Value == nil || len(got[2].Value) != 0 {
		t.Errorf("detach gave value %q, headers %+v; want value, a=a, null null, empty empty and not null, none changed with the batch", value, got)
	}
}

// TestScanMemory lists schedules with Scan, as kdelay status and the web
// console (inside kdelay serve) do: while it passes on the last, it holds
// what the scheduler holds for each schedule of one partition, a slot, and
// a fixed amount beside (the fetches in flight), not the schedules it
// passed on, nor the slots of the partitions it read before. List, which
// sorts them, holds each.
//
// Not parallel: the heap is the process's.
func TestScanMemory(t *testing.T) {
	if os.Getenv(kafkatest.EnvBrokers) != "" {
		// What Scan holds is the client's, whatever the broker; 400,000
		// records written to a real one would slow the tier's other tests.
		t.Skip("client memory, measured on kfake whatever " + kafkatest.EnvBrokers + " says")
	}
	const n, partitions = 400_000, 8
	const fixed = 8 << 20 // two fetches decoded, and the client's own
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	topics := kdelay.Topics{Prefix: name}
	writeSchedulesIn(t, cluster, topics, n, partitions)
	client := func() *kgo.Client {
		cl, err := kgo.NewClient(append(ListOpts(topics), kgo.SeedBrokers(cluster.Brokers...))...)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rules := kdelay.Rules{Topics: topics, MaxDelay: kdelay.DefaultMaxDelay}
	// Once first, with a client of its own, as each read of the fleet
	// makes one: what the writer and a first read leave behind is gone
	// before the heap is read.
	first := client()
	if err := Scan(ctx, first, rules, func(Listed) {}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	first.Close()
	cl := client()
	defer cl.Close()
	var before, during runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	seen := 0
	err := Scan(ctx, cl, rules, func(l Listed) {
		if l.Err != nil || l.Schedule.Target != "memory-target" || len(l.Value) != 100 {
			t.Errorf("listed %s: %+v (%v), want the daily schedule to memory-target with its 100-byte value", l.ID, l.Schedule, l.Err)
		}
		if seen++; seen == n {
			runtime.GC()
			runtime.ReadMemStats(&during)
		}
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	if seen != n {
		t.Fatalf("Scan passed on %d schedules, want %d", seen, n)
	}
	held := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("Scan of %d schedules held %d bytes of live heap at the last: %.0f bytes a schedule", n, held, float64(held)/n)
	// The largest of 8 partitions holds well under a quarter more than an
	// eighth of the ids (murmur2 spreads them evenly).
	if limit := int64(maxScheduleBytes*n/partitions*5/4 + fixed); held > limit {
		t.Errorf("Scan held %d bytes of live heap passing on the last of %d schedules in %d partitions, more than %d (%d a schedule of one partition and %d beside)",
			held, n, partitions, limit, maxScheduleBytes, fixed)
	}
}
