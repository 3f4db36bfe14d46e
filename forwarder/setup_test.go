package forwarder

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a broker, a Forwarder configuration with topics of the test's
// own, a target topic, and a client to produce and consume with.
type fixture struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	cfg     Config
	target  string
	cl      *kgo.Client
}

func setup(t *testing.T, levelNames []string, opts ...kfake.Opt) *fixture {
	t.Helper()
	cluster := kafkatest.New(t, opts...)
	set, err := levels.Parse(levelNames)
	if err != nil {
		t.Fatal(err)
	}
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	fx := &fixture{
		t:       t,
		cluster: cluster,
		target:  name + ".target",
		cl:      cluster.Client(kgo.ProducerLinger(0)),
		cfg: Config{
			Brokers:    cluster.Brokers,
			Topics:     kdelay.Topics{Prefix: name},
			Levels:     set,
			Group:      name,
			Partitions: 2,
			Logger:     testLogger(t),
		},
	}
	cluster.CreateTopic(fx.target, 3, nil)
	return fx
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("KDELAY_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

// start runs a Forwarder until the returned stop is called (or the test
// ends), and fails the test if Run returns an error.
func (fx *fixture) start(cfg Config) (f *Forwarder, stop func()) {
	fx.t.Helper()
	f, err := New(cfg)
	if err != nil {
		fx.t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	select {
	case <-f.Ready():
	case err := <-done:
		cancel()
		fx.t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		fx.t.Fatal("forwarder not ready after 30s")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			fx.t.Errorf("Run: %v", err)
		}
	}
	fx.t.Cleanup(stop)
	return f, stop
}

// send produces a record to the ingress topic with the given headers
// (name, value pairs) and returns it as written.
func (fx *fixture) send(value string, headers ...string) *kgo.Record {
	fx.t.Helper()
	r := &kgo.Record{Topic: fx.cfg.Topics.Ingress(), Value: []byte(value)}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fx.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		fx.t.Fatalf("produce to ingress: %v", err)
	}
	return r
}

// atLeast is a done func for kafkatest.Collector.Until: n records arrived.
func atLeast(n int) func([]kafkatest.Arrival) bool {
	return func(got []kafkatest.Arrival) bool { return len(got) >= n }
}
