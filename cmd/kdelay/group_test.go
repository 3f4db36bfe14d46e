package main

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestGroupFailover runs several `kdelay serve` processes as one consumer
// group on one broker (kfake in this process, or the real cluster of
// KDELAY_TEST_BROKERS) and changes the group under load: 3 processes share
// the partitions, one is killed with SIGKILL, one stopped with SIGTERM, the
// last one takes over everything, then two more join. Every record sent
// during all that is delivered, none early.
func TestGroupFailover(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts five kdelay processes; skipped with -short")
	}
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	target := name + ".target"
	cluster.CreateTopic(target, 6, nil)
	bin := binary(t)
	brokers := strings.Join(cluster.Brokers, ",")
	// A short session timeout, so the group notices the killed process in
	// seconds rather than the default 45.
	args := []string{"serve", "--brokers", brokers, "--topic-prefix", name, "--group", name,
		"--levels", "1s,2s,5s", "--partitions", "6", "--session-timeout", "6s", "--log-level", "debug"}
	// Each process its own instance id: on one host they would all
	// default to the host name and fence each other.
	started := 0
	start := func() *process {
		started++
		return startServe(t, bin, append(args, "--instance-id", "p"+strconv.Itoa(started))...)
	}

	producer := cluster.Client(kgo.ProducerLinger(0))
	rng := rand.New(rand.NewPCG(5, 6))
	due := map[string]time.Time{}
	send := func(n int) {
		t.Helper()
		for range n {
			id := strconv.Itoa(len(due))
			d := time.Duration(rng.Int64N(int64(7 * time.Second))).Truncate(time.Millisecond)
			r := &kgo.Record{Topic: kdelay.Topics{Prefix: name}.Ingress(), Key: []byte(id), Value: []byte(id), Headers: []kgo.RecordHeader{
				{Key: kdelay.HeaderTarget, Value: []byte(target)},
				{Key: kdelay.HeaderDelay, Value: []byte(strconv.FormatInt(d.Milliseconds(), 10))},
				{Key: kdelay.HeaderID, Value: []byte(id)},
			}}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			cancel()
			due[id] = r.Timestamp.Truncate(time.Millisecond).Add(d)
		}
	}
	ingress := name + ".ingress"
	members := func(want int) {
		t.Helper()
		adm := kadm.NewClient(producer)
		var got map[string][]int32
		ok := eventually(60*time.Second, func() bool {
			got = ingressByInstance(adm, name, ingress) // at-least-once: one group for every stage
			total := 0
			for _, ps := range got {
				total += len(ps)
			}
			return len(got) == want && total == 6
		})
		if !ok {
			t.Fatalf("ingress group: partitions per instance %v, want %d members sharing all 6", got, want)
		}
		t.Logf("ingress group: %d members, partitions per instance %v", want, got)
	}

	a, b := start(), start()
	start()
	members(3)
	send(150)

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	send(150)
	members(2)

	if code, _ := b.stop(t); code != 0 {
		t.Errorf("SIGTERM: exit code %d, want 0", code)
	}
	send(150)
	members(1)

	start()
	start()
	members(3)
	send(150)

	n := len(due)
	got := cluster.Collect(target).Until(90*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.Values(got)) == n })
	if seen := kafkatest.Values(got); len(seen) != n {
		var missing []string
		for id := range due {
			if seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		t.Fatalf("%d of %d records delivered; missing %v", len(seen), n, missing)
	}
	for _, r := range got {
		if r.At.Before(due[string(r.Value)]) {
			t.Errorf("record %s arrived %s early", r.Value, due[string(r.Value)].Sub(r.At))
		}
	}
	t.Logf("%d records through 3 → 2 (SIGKILL) → 1 (SIGTERM) → 3 processes: all delivered, none early, %d delivered twice",
		n, len(got)-n)
}
