package forwarder

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

// The tests in this file run the real forwarder against kfake inside a
// synctest bubble: the clock is fake and moves only when every goroutine is
// blocked, so hours of delays take seconds, and lateness is measured without
// the machine's noise. A record's lateness in the bubble is what kdelay's own
// logic adds; on a real clock the machine adds its latency on top.

// bubble is a kfake cluster on an in-memory network inside a synctest
// bubble, a forwarder configuration for it, and a client.
type bubble struct {
	t      *testing.T
	fake   *kfake.Cluster // the bubble's broker, for faults
	cfg    Config
	cl     *kgo.Client
	dial   kgo.Opt
	target string
}

// A bubbleOpt adds options to what inBubble builds: to the cluster's, and to
// those of the bubble's own client.
type bubbleOpt struct {
	cluster []kfake.Opt
	client  []kgo.Opt
}

func inBubble(t *testing.T, levelNames []string, fn func(b *bubble), opts ...bubbleOpt) {
	if os.Getenv(kafkatest.EnvBrokers) != "" {
		t.Skip("a controlled-clock test: it runs on kfake in a synctest bubble, whatever " + kafkatest.EnvBrokers + " says")
	}
	synctest.Test(t, func(t *testing.T) {
		var network kfake.VirtualNetwork
		clusterOpts := []kfake.Opt{kfake.NumBrokers(1), kfake.Ports(9092), kfake.ListenFn(network.Listen)}
		var clientOpts []kgo.Opt
		for _, o := range opts {
			clusterOpts, clientOpts = append(clusterOpts, o.cluster...), append(clientOpts, o.client...)
		}
		cluster, err := kfake.NewCluster(clusterOpts...)
		if err != nil {
			t.Fatal(err)
		}
		// Cleanups, not defers: the collectors' cleanups, registered later,
		// stop them before the cluster closes under them.
		t.Cleanup(cluster.Close)
		set, err := levels.Parse(levelNames)
		if err != nil {
			t.Fatal(err)
		}
		dial := kgo.Dialer(network.DialContext)
		b := &bubble{t: t, fake: cluster, dial: dial, target: "target"}
		b.cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()...), dial, kgo.ProducerLinger(0)}, clientOpts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.cl.Close)
		b.cfg = Config{
			Brokers:    cluster.ListenAddrs(),
			ClientOpts: []kgo.Opt{dial},
			Levels:     set,
			Partitions: 3,
			Logger:     testLogger(t),
		}
		if _, err := kadmClient(b.cl).CreateTopic(context.Background(), 3, 1, nil, b.target); err != nil {
			t.Fatal(err)
		}
		fn(b)
	})
}

// run starts a Forwarder and returns a function that stops it and waits.
func (b *bubble) run(cfg Config) (stop func()) {
	_, stop = b.start(cfg)
	return stop
}

func (b *bubble) produce(rs ...*kgo.Record) {
	if err := b.cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		b.t.Fatalf("produce: %v", err)
	}
}

// collect starts reading the target now, stamping each record with the
// bubble's time of arrival, and returns a function that waits until want
// records arrived, failing if they do not within limit of bubble time from
// now.
func (b *bubble) collect(want int, limit time.Duration) (wait func() []kafkatest.Arrival) {
	// kfake answers a waiting fetch as soon as a record is written, so a
	// short fetch wait adds nothing here but wake-ups, hours of them.
	c := kafkatest.Collect(b.t, b.cfg.Brokers, b.target, b.dial, kgo.FetchMaxWait(5*time.Second))
	end := time.Now().Add(limit)
	return func() []kafkatest.Arrival {
		got := c.Until(time.Until(end), atLeast(want))
		if len(got) < want {
			b.t.Fatalf("%d of %d records arrived within %s", len(got), want, limit)
		}
		return got
	}
}

// producer returns a function that writes records to the partitions they
// name, in batches of at most 16 KiB, so that a fetch brings about what it
// asks for.
func (b *bubble) producer() func(rs ...*kgo.Record) {
	writer, err := kgo.NewClient(kgo.SeedBrokers(b.cfg.Brokers...), b.dial, kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(16<<10))
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(writer.Close)
	return func(rs ...*kgo.Record) {
		if err := writer.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			b.t.Fatalf("produce: %v", err)
		}
	}
}

// checkOnTime fails the test for each record that did not arrive 0 to 20ms
// after due[its value], in bubble time.
func checkOnTime(t *testing.T, got []kafkatest.Arrival, due map[string]time.Time) {
	t.Helper()
	for _, a := range got {
		id := string(a.Value)
		if late := a.At.Sub(due[id].Truncate(time.Millisecond)); late < 0 || late > 20*time.Millisecond {
			t.Errorf("%s arrived %s after it was due, want 0 to 20ms in bubble time", id, late)
		}
	}
}

func ingress(cfg Config, target string, value string, headers ...string) *kgo.Record {
	r := &kgo.Record{Topic: cfg.WithDefaults().Topics.Ingress(), Value: []byte(value),
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderTarget, Value: []byte(target)}}}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	return r
}

// TestNeverEarly sends thousands of random delays, relative and absolute,
// some already past, through RocketMQ's 18 levels, and checks every record
// arrives exactly once and none before its due time.
func TestNeverEarly(t *testing.T) {
	t.Parallel()
	inBubble(t, levels.Default().Names(), func(b *bubble) {
		b.cfg.CheckInterval = time.Minute // exact mode needs no polling; fewer idle wake-ups keep the test fast
		stop := b.run(b.cfg)
		defer stop()
		const n = 3000
		arrivals := b.collect(n, 4*time.Hour)

		rng := rand.New(rand.NewPCG(7, 11))
		due := map[string]time.Time{}  // when each record is due
		sent := map[string]time.Time{} // when each was sent: a past due time is delivered at once
		var batch []*kgo.Record
		for i := range n {
			id := strconv.Itoa(i)
			d := time.Duration(rng.Int64N(int64(3 * time.Hour)))
			if i%10 == 0 {
				d = time.Duration(rng.Int64N(int64(2 * time.Second))) // many sub-level remainders
			}
			now := time.Now()
			var r *kgo.Record
			if i%3 == 0 {
				at := now.Add(d - time.Minute) // a minute in the past for the shortest ones
				r = ingress(b.cfg, b.target, id, kdelay.HeaderDeliverAt, at.Format(time.RFC3339Nano), kdelay.HeaderID, id)
				due[id] = kdelay.CeilMillis(at)
			} else {
				r = ingress(b.cfg, b.target, id, kdelay.HeaderDelay, d.String(), kdelay.HeaderID, id)
				due[id] = kdelay.CeilMillis(now.Truncate(time.Millisecond).Add(d)) // Kafka timestamps are milliseconds
			}
			r.Key = []byte(strconv.Itoa(rng.IntN(50)))
			r.Timestamp = now
			sent[id] = now
			batch = append(batch, r)
			if i%500 == 499 { // spread the sends over time, so levels interleave
				b.produce(batch...)
				batch = nil
				time.Sleep(time.Duration(rng.Int64N(int64(10 * time.Minute))))
			}
		}
		b.produce(batch...)

		var early, maxLate time.Duration
		seen := map[string]bool{}
		for _, a := range arrivals() {
			id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
			if seen[id] {
				t.Errorf("record %s delivered twice", id)
			}
			seen[id] = true
			late := a.At.Sub(due[id])
			if late < 0 {
				t.Errorf("record %s arrived %s early", id, -late)
				early = min(early, late)
			}
			if due[id].Before(sent[id]) {
				late = a.At.Sub(sent[id])
			}
			maxLate = max(maxLate, late)
		}
		// In the bubble the machine adds no latency, so this is kdelay's own:
		// at most kgo's 10ms pause between metadata loads, paid the first
		// time a client produces to a topic.
		if maxLate > 20*time.Millisecond {
			t.Errorf("max lateness in bubble time %s, want at most 20ms: a forwarder slept past a due time", maxLate)
		}
		t.Logf("%d records, max lateness in bubble time %s", n, maxLate)
	})
}
