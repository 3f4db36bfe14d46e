package main

// End-to-end tests: they build the kdelay binary, run `kdelay serve` as a
// user would, write to the ingress with kcat, and read the targets with a
// plain Kafka consumer. By default serve runs its embedded broker; with
// KDELAY_TEST_BROKERS set it runs against that real cluster instead, with
// topics and groups of the test's own.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// build builds the kdelay binary once for every test that needs it; TestMain
// sets it up.
var build func() (string, error)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kdelay-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build = sync.OnceValues(func() (string, error) { return buildBinary(dir) })
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { _ = os.RemoveAll(dir) }))
}

// buildBinary runs `go build` into dir, with the race detector when the
// tests run with it, so that a race in serve fails its exit code check.
func buildBinary(dir string) (string, error) {
	path := dir + "/kdelay"
	args := []string{"build", "-o", path}
	if raceEnabled() {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return path, nil
}

// binary is the path of the kdelay binary, built on first use.
func binary(t *testing.T) string {
	t.Helper()
	path, err := build()
	if err != nil {
		t.Fatalf("build kdelay: %v", err)
	}
	return path
}

func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// e2e is what an end-to-end test runs kdelay with.
type e2e struct {
	t       *testing.T
	bin     string
	dir     string             // working and data directory of serve
	cluster *kafkatest.Cluster // the real cluster, nil for the embedded broker
	prefix  string             // of kdelay's topics
	group   string
	target  string
	levels  []string      // serve's --levels
	env     []string      // more variables for serve, NAME=value
	started func(pid int) // if set, called once serve has started, before it is ready
}

func setup(t *testing.T) *e2e {
	t.Helper()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not on PATH; install it (apt-get install kcat) to run the end-to-end tests")
	}
	name := kafkatest.Name(t)
	e := &e2e{t: t, bin: binary(t), dir: t.TempDir(), prefix: kdelay.DefaultPrefix, group: "kdelay", target: name + ".target",
		levels: []string{"1s", "2s", "5s"}}
	if os.Getenv(kafkatest.EnvBrokers) != "" {
		// A real cluster is shared: use topics and groups of our own, and
		// create the target, since production brokers do not auto-create.
		e.cluster = kafkatest.New(t)
		e.prefix, e.group = name, name
		e.cluster.DeleteOnCleanup(name)
		e.cluster.CreateTopic(e.target, 3, nil)
	}
	return e
}

// serveArgs run serve with e.levels, by default small levels so that records
// hop between levels within seconds.
func (e *e2e) serveArgs() []string {
	args := []string{"serve", "--levels", strings.Join(e.levels, ","), "--partitions", "2", "--log-level", "debug",
		"--topic-prefix", e.prefix, "--group", e.group}
	if e.cluster != nil {
		return append(args, "--brokers", strings.Join(e.cluster.Brokers, ","))
	}
	return append(args, "--listen", "127.0.0.1:0", "--data-dir", e.dir+"/data")
}

func (e *e2e) topics() kdelay.Topics { return kdelay.Topics{Prefix: e.prefix} }

func (e *e2e) command(args ...string) *exec.Cmd { return command(e.bin, e.dir, args...) }

// command runs the binary in dir without the KDELAY_ variables of the
// test's own environment, which would otherwise configure it. A race-enabled
// binary exits as soon as it is done instead of waiting a second for
// late race reports.
func command(bin, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// Tests run many serves at once: each admin listener on a free port.
	cmd.Env = []string{"GORACE=atexit_sleep_ms=0", "KDELAY_ADMIN=127.0.0.1:0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KDELAY_") && !strings.HasPrefix(kv, "GORACE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// serve starts `kdelay serve` and waits until it prints that it is ready.
func (e *e2e) serve() *process {
	t := e.t
	t.Helper()
	s := &process{cmd: e.command(e.serveArgs()...), out: &output{ready: make(chan string, 1)}, exited: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.Env = append(s.cmd.Env, e.env...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start kdelay serve: %v", err)
	}
	if e.started != nil {
		e.started(s.cmd.Process.Pid)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() || os.Getenv("KDELAY_TEST_LOG") != "" {
			t.Logf("kdelay serve printed:\n%s", s.out)
		}
	})
	select {
	case s.brokers = <-s.out.ready:
	case <-s.exited:
		t.Fatalf("kdelay serve exited before it was ready (%v):\n%s", s.err, s.out)
	case <-time.After(30 * time.Second):
		t.Fatalf("kdelay serve not ready after 30s:\n%s", s.out)
	}
	e.waitConsuming(s.brokers)
	return s
}

// eventually polls cond until it holds or the deadline passes.
func eventually(deadline time.Duration, cond func() bool) bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(deadline)
	for !cond() {
		select {
		case <-tick.C:
		case <-timeout:
			return cond()
		}
	}
	return true
}

// waitConsuming waits until every forwarder has joined its consumer group,
// so that what the tests measure is kdelay's lateness, not that of the
// first rebalance.
func (e *e2e) waitConsuming(brokers string) {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	groups := e.groups()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var described kadm.DescribedGroups
	stable := eventually(30*time.Second, func() bool {
		described, err = kadm.NewClient(cl).DescribeGroups(ctx, groups...)
		ok := err == nil && len(described) == len(groups)
		for _, g := range described {
			ok = ok && g.Err == nil && g.State == "Stable" && len(g.Members) > 0
		}
		return ok
	})
	if !stable {
		e.t.Fatalf("kdelay's groups %v not all stable after 30s: %v %+v", groups, err, described)
	}
}

// groups are kdelay's consumer groups: at-least-once reads every stage with
// the group itself.
func (e *e2e) groups() []string { return []string{e.group} }

// waitCommitted waits until every kdelay group has committed every record
// of its topic, so that a restart redelivers nothing.
func (e *e2e) waitCommitted(brokers string) {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var behind []kadm.GroupMemberLag
	committed := eventually(20*time.Second, func() bool {
		lags, err := kadm.NewClient(cl).Lag(ctx, e.groups()...)
		if err != nil || !lags.Ok() || len(lags) != len(e.groups()) {
			return false
		}
		behind = behind[:0]
		for _, g := range lags.Sorted() {
			for _, m := range g.Lag.Sorted() {
				if m.Err != nil || m.Lag != 0 {
					behind = append(behind, m)
				}
			}
		}
		return len(behind) == 0
	})
	if !committed {
		e.t.Fatalf("kdelay's groups have not committed everything after 20s: %+v", behind)
	}
}

// process is a running `kdelay serve`.
type process struct {
	cmd     *exec.Cmd
	out     *output
	brokers string // as printed when ready: where to connect
	exited  chan struct{}
	err     error // from Wait, once exited is closed
}

// collect starts reading topic on the process's brokers from its start, until
// the test ends.
func (s *process) collect(t *testing.T, topic string) *kafkatest.Collector {
	return kafkatest.Collect(t, strings.Split(s.brokers, ","), topic)
}

// stop sends SIGTERM and waits for the process to exit.
func (s *process) stop(t *testing.T) (code int, took time.Duration) {
	t.Helper()
	start := time.Now()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		// The Go runtime prints every goroutine's stack on SIGQUIT: what
		// the shutdown waits on, in the output logged as the test fails.
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(5 * time.Second):
		}
		t.Fatalf("kdelay serve still running 30s after SIGTERM; its goroutines (SIGQUIT) end its output")
	}
	return s.cmd.ProcessState.ExitCode(), time.Since(start)
}

// kill sends SIGKILL, as a crash or the OOM killer would, and waits for the
// process to be gone.
func (s *process) kill(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("kdelay serve still running 10s after SIGKILL")
	}
}

// readyLine is what serve prints once it forwards, with where to connect.
var readyLine = regexp.MustCompile(`kdelay is ready: (?:embedded Kafka broker at|forwarding on brokers) (\S+)`)

// output keeps what a process prints and, for serve, reports the broker
// address on ready once the ready line appears.
type output struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan string
	seen  bool
}

func (o *output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(b)
	if m := readyLine.FindSubmatch(o.buf.Bytes()); m != nil && o.ready != nil && !o.seen {
		o.seen = true
		o.ready <- string(m[1])
	}
	return len(b), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// all is a done func for kafkatest.Collector.Until: every value in want
// arrived.
func all(want []string) func([]kafkatest.Arrival) bool {
	return func(got []kafkatest.Arrival) bool {
		seen := kafkatest.Values(got)
		for _, v := range want {
			if seen[v] == 0 {
				return false
			}
		}
		return true
	}
}

// settled wraps done to also wait until nothing arrived for quiet, so that
// a duplicate would have shown up.
func settled(done func([]kafkatest.Arrival) bool, quiet time.Duration) func([]kafkatest.Arrival) bool {
	return func(got []kafkatest.Arrival) bool {
		return done(got) && (len(got) == 0 || time.Since(got[len(got)-1].At) >= quiet)
	}
}

func headerOf(r *kgo.Record, name string) string {
	v, _ := header(r, name)
	return v
}

func place(r *kgo.Record) string { return fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset) }

// startServe runs the kdelay binary bin with args (serve and its flags) in a
// directory of its own until the test ends, and waits until it is ready. It
// is killed at the end of the test, and what it printed is logged if the
// test failed.
func startServe(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	return startServeEnv(t, bin, nil, args...)
}

// startServeEnv is startServe with env added to the process's environment.
func startServeEnv(t *testing.T, bin string, env []string, args ...string) *process {
	t.Helper()
	s := &process{cmd: command(bin, t.TempDir(), args...), out: &output{ready: make(chan string, 1)}, exited: make(chan struct{})}
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.Env = append(s.cmd.Env, env...)
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start kdelay serve: %v", err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("kdelay %s (pid %d) printed:\n%s", strings.Join(args, " "), s.cmd.Process.Pid, s.out)
		}
	})
	select {
	case s.brokers = <-s.out.ready:
	case <-s.exited:
		t.Fatalf("kdelay serve exited before it was ready (%v):\n%s", s.err, s.out)
	case <-time.After(30 * time.Second):
		t.Fatalf("kdelay serve not ready after 30s:\n%s", s.out)
	}
	return s
}
