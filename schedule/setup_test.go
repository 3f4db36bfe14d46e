package schedule

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/forwarder/forwardertest"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The tests run the real scheduler and the real forwarder against kfake
// inside a synctest bubble: the clock is fake and moves only when every
// goroutine is blocked, so minutes of schedules take milliseconds, and an
// occurrence's lateness is kdelay's own. The bubble's clock starts at
// 2000-01-01T00:00:00Z.

// bubble is a kfake cluster on an in-memory network, with a forwarder
// delivering from it, a scheduler configuration for it, and a client.
type bubble struct {
	t      *testing.T
	cfg    Config
	cl     *kgo.Client
	dial   kgo.Opt
	target string
	fake   *kfake.Cluster
}

func inBubble(t *testing.T, exactlyOnce bool, fn func(b *bubble)) {
	t.Helper()
	if os.Getenv(kafkatest.EnvBrokers) != "" {
		t.Skip("a controlled-clock test: it runs on kfake in a synctest bubble, whatever " + kafkatest.EnvBrokers + " says")
	}
	synctest.Test(t, func(t *testing.T) {
		var network kfake.VirtualNetwork
		// kfake's cleaner off, as on kdelay's embedded broker: it would
		// compact the schedules topic each hour of the bubble's clock.
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(9092), kfake.ListenFn(network.Listen),
			kfake.BrokerConfigs(map[string]string{"log.cleaner.backoff.ms": strconv.FormatInt((100 * 365 * 24 * time.Hour).Milliseconds(), 10)}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cluster.Close)
		dial := kgo.Dialer(network.DialContext)
		b := &bubble{t: t, dial: dial, target: "target", fake: cluster}
		b.cl, err = kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), dial, kgo.ProducerLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.cl.Close)
		adm := kadm.NewClient(b.cl)
		if _, err := adm.CreateTopic(context.Background(), 3, 1, nil, b.target); err != nil {
			t.Fatal(err)
		}
		// As an operator would, before kdelay starts: Run checks it.
		compact := "compact"
		if _, err := adm.CreateTopic(context.Background(), 3, 1, map[string]*string{"cleanup.policy": &compact}, kdelay.Topics{}.Schedules()); err != nil {
			t.Fatal(err)
		}
		set, err := levels.Parse([]string{"1s", "10s", "1m"})
		if err != nil {
			t.Fatal(err)
		}
		// The forwarder delivers at least once, whatever the scheduler
		// does: it reads the ingress read_committed either way, and in a
		// bubble its exactly-once commits stall (kgo's GroupTransactSession
		// holds a mutex for 500ms after a commit without offsets, and a
		// goroutine waiting on a mutex keeps the fake clock from moving).
		forwardertest.Serve(t, forwarder.Config{Brokers: cluster.ListenAddrs(), ClientOpts: []kgo.Opt{dial}, Levels: set,
			Partitions: 3, InstanceID: "forwarder", Logger: testLogger(t)})
		b.cfg = Config{Brokers: cluster.ListenAddrs(), ClientOpts: []kgo.Opt{dial}, InstanceID: "scheduler", ExactlyOnce: exactlyOnce,
			Partitions: 3, Logger: testLogger(t)}
		fn(b)
	})
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("KDELAY_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

// run starts a Scheduler with cfg; stop ends it and returns what Run
// returned.
func (b *bubble) run(cfg Config) (stop func() error) {
	b.t.Helper()
	s, err := New(cfg)
	if err != nil {
		b.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	var runErr error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	b.t.Cleanup(func() {
		if err := stop(); err != nil {
			b.t.Errorf("Scheduler.Run: %v", err)
		}
	})
	return stop
}

// schedule writes a schedule record, with kcat's default of no timestamp
// of its own: the broker's client stamps it now. A nil value deletes.
func (b *bubble) schedule(id string, value []byte, headers ...string) {
	b.t.Helper()
	r := &kgo.Record{Topic: b.cfg.WithDefaults().Topics.Schedules(), Key: []byte(id), Value: value}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	if err := b.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		b.t.Fatalf("write schedule %s: %v", id, err)
	}
}

// collect reads topic (the target when "") from its start, read_committed.
func (b *bubble) collect(topic string) *kafkatest.Collector {
	return kafkatest.Collect(b.t, b.cfg.Brokers, cmp.Or(topic, b.target), b.dial, kgo.FetchMaxWait(5*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}

// minute is the bubble's start plus m minutes and s seconds.
func minute(m, s int) time.Time {
	return time.Date(2000, 1, 1, 0, m, s, 0, time.UTC)
}

// occurrence is the kdelay-id of schedule id's occurrence at t.
func occurrence(id string, t time.Time) string { return kdelay.OccurrenceID(id, t) }

// runScheduler runs a Scheduler with cfg, outside a bubble, until the test
// ends; Run returning an error fails the test.
func runScheduler(t *testing.T, cfg Config) *Scheduler {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	runUntilEnd(t, s)
	return s
}

// runUntilEnd runs s, outside a bubble, until the test ends; Run returning
// an error fails the test.
func runUntilEnd(t *testing.T, s *Scheduler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}
