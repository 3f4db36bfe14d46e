package admin

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
	"github.com/kdelay/kdelay/schedule"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a broker, a forwarder with Metrics as its observer and an admin
// Server for it, neither running yet.
type fixture struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	fwd     *forwarder.Forwarder
	fcfg    forwarder.Config
	srv     *Server
	sched   *schedule.Scheduler // nil unless setupScheduled
	target  string
	cl      *kgo.Client
	gone    atomic.Bool // the test closed the broker: Run may fail
}

func setup(t *testing.T) *fixture { return setupWith(t, nil) }

// setupWith is setup with the forwarder's configuration changed by tweak.
func setupWith(t *testing.T, tweak func(*forwarder.Config)) *fixture { return build(t, tweak, false) }

// setupScheduled is setup with a scheduler of recurring schedules beside the
// forwarder, not running yet, which the Server reports on.
func setupScheduled(t *testing.T) *fixture { return build(t, nil, true) }

func build(t *testing.T, tweak func(*forwarder.Config), scheduled bool) *fixture {
	t.Helper()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	set, err := levels.Parse([]string{"1s", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	fcfg := forwarder.Config{
		Brokers: cluster.Brokers, Topics: kdelay.Topics{Prefix: name}, Levels: set, Group: name,
		Partitions: 2, ShutdownTimeout: 2 * time.Second, Observer: m,
	}
	if tweak != nil {
		tweak(&fcfg)
	}
	var sched *schedule.Scheduler
	if scheduled {
		var err error
		sched, err = schedule.New(schedule.Config{Brokers: cluster.Brokers, Topics: fcfg.Topics, Group: name, InstanceID: name,
			Partitions: 2, ShutdownTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("schedule.New: %v", err)
		}
		fcfg.SharedBytes = sched.IndexBytes // as kdelay serve does
	}
	f, err := forwarder.New(fcfg)
	if err != nil {
		t.Fatalf("forwarder.New: %v", err)
	}
	// A client given to the forwarder is the listener's too, as in serve.
	cfg := Config{Addr: "127.0.0.1:0", Forwarder: f, Metrics: m, Brokers: cluster.Brokers, Client: fcfg.Client}
	if scheduled {
		cfg.Scheduler = sched
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	fx := &fixture{t: t, cluster: cluster, fwd: f, fcfg: fcfg, srv: srv, sched: sched, target: name + ".target",
		cl: cluster.Client(kgo.ProducerLinger(0))}
	cluster.CreateTopic(fx.target, 3, nil)
	return fx
}

// run runs fn until the test ends, and waits for it to return then.
func (fx *fixture) run(fn func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	fx.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !fx.gone.Load() {
			fx.t.Errorf("run: %v", err)
		}
	})
}

// get requests path of the admin listener and returns the status and body.
func (fx *fixture) get(path string) (int, string) {
	fx.t.Helper()
	resp, err := http.Get("http://" + fx.srv.Addr() + path)
	if err != nil {
		fx.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fx.t.Fatalf("GET %s: read body: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// waitStatus polls path until it answers want, for up to deadline, and
// returns the last body.
func (fx *fixture) waitStatus(path string, want int, deadline time.Duration) string {
	fx.t.Helper()
	var code int
	var body string
	for end := time.Now().Add(deadline); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if code, body = fx.get(path); code == want {
			return body
		}
	}
	fx.t.Fatalf("GET %s answered %d %q for %s, want %d", path, code, body, deadline, want)
	return ""
}

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrape reads /metrics.
func (fx *fixture) scrape() []sample {
	fx.t.Helper()
	code, body := fx.get("/metrics")
	if code != http.StatusOK {
		fx.t.Fatalf("GET /metrics: %d %s", code, body)
	}
	var out []sample
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		m := sampleLine.FindStringSubmatch(sc.Text())
		if m == nil || strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			fx.t.Fatalf("metric line %q: %v", sc.Text(), err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out
}

// value sums the samples of name whose labels include want.
func value(samples []sample, name string, want map[string]string) (sum float64, found bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		match := true
		for k, v := range want {
			match = match && s.labels[k] == v
		}
		if match {
			sum, found = sum+s.value, true
		}
	}
	return sum, found
}
