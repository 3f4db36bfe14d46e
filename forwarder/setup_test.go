package forwarder

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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

// sendDue sends n records due at once to the fixture's target, with the
// values and kdelay-ids "0" to n-1.
func (fx *fixture) sendDue(n int) {
	fx.t.Helper()
	for i := range n {
		fx.send(strconv.Itoa(i), kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0", kdelay.HeaderID, strconv.Itoa(i))
	}
}

// atLeast is a done func for kafkatest.Collector.Until: n records arrived.
func atLeast(n int) func([]kafkatest.Arrival) bool {
	return func(got []kafkatest.Arrival) bool { return len(got) >= n }
}

// logBook is a logger whose lines a test reads back, and echoes to stderr
// when KDELAY_TEST_LOG is set.
type logBook struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBook) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if os.Getenv("KDELAY_TEST_LOG") != "" {
		_, _ = os.Stderr.Write(p)
	}
	return b.buf.Write(p)
}

// captureLogs returns a debug-level text logger and the book it writes to.
func captureLogs(t *testing.T) (*slog.Logger, *logBook) {
	b := &logBook{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name()), b
}

// line returns the first line holding every one of parts, waiting up to
// deadline for it, or "" if none came.
func (b *logBook) line(deadline time.Duration, parts ...string) string {
	end := time.Now().Add(deadline)
	for {
		b.mu.Lock()
		text := b.buf.String()
		b.mu.Unlock()
		for l := range strings.Lines(text) {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
				return l
			}
		}
		if time.Now().After(end) {
			return ""
		}
		time.Sleep(10 * time.Millisecond) // a deadline-bounded poll
	}
}

// stageGroup is the consumer group a Forwarder with cfg reads topic with:
// cfg.Group at-least-once, the stage's own group exactly-once.
func stageGroup(cfg Config, topic string) string {
	cfg = cfg.WithDefaults()
	for _, s := range cfg.stages() {
		if s.topic == topic {
			return cfg.Group + s.group
		}
	}
	panic("no stage reads " + topic)
}

// committedAll waits up to deadline until the group has committed, on every
// partition of topic, the partition's end offset: a restart then re-delivers
// nothing. It returns the committed and end offsets it saw last.
func (fx *fixture) committedAll(group, topic string, deadline time.Duration) (ok bool, committed, end map[int32]int64) {
	fx.t.Helper()
	adm := kadm.NewClient(fx.cl)
	until := time.Now().Add(deadline)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			cancel()
			fx.t.Fatalf("list end offsets of %s: %v", topic, err)
		}
		offs, err := adm.FetchOffsets(ctx, group)
		cancel()
		if err != nil {
			fx.t.Fatalf("fetch offsets of %s: %v", group, err)
		}
		committed, end = map[int32]int64{}, map[int32]int64{}
		ok = true
		ends.Each(func(o kadm.ListedOffset) {
			end[o.Partition] = o.Offset
			c, has := offs.Lookup(topic, o.Partition)
			committed[o.Partition] = -1
			if has {
				committed[o.Partition] = c.At
			}
			if o.Offset > 0 && committed[o.Partition] != o.Offset {
				ok = false
			}
		})
		if ok || time.Now().After(until) {
			return ok, committed, end
		}
		time.Sleep(50 * time.Millisecond) // a deadline-bounded poll
	}
}
