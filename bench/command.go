package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kdelay/kdelay"
)

// Command runs the forwarder under test as a child process, normally
// `kdelay serve --brokers ... --topic-prefix ...`, so that its CPU time and
// memory are its own, apart from the broker's and the benchmark's. It does
// cannot pass Setup.ClientOpts, which are Go values: Env carries the same
// settings as `kdelay serve` reads them.
type Command struct {
	// Path is the kdelay binary. Default: this process's executable.
	Path string
	// Args come before the serve flags. Default: serve.
	Args []string
	// Stderr receives the child's logs. Default: kept in memory, and the
	// last of it reported if the child fails.
	Stderr io.Writer
	// Env is added to the child's environment: KDELAY_* settings that must
	// not show on its command line, such as its TLS and SASL settings.
	// Default: none.
	Env []string
}

func (c Command) String() string {
	return "child process: " + strings.Join(append([]string{"kdelay"}, c.args()...), " ")
}

func (c Command) args() []string {
	if len(c.Args) == 0 {
		return []string{"serve"}
	}
	return c.Args
}

// Start starts the child. It is not ready until its groups are: Run waits
// for that.
func (c Command) Start(_ context.Context, s Setup) (Instance, error) {
	ch, err := c.start(s)
	if err != nil {
		return nil, err
	}
	return ch, nil
}

func (c Command) start(s Setup, extra ...string) (*child, error) {
	path := c.Path
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the kdelay binary to run serve: %w", err)
		}
		path = exe
	}
	// The command's own flags come after the benchmark's, so that they
	// override them (--serve-flag=--log-level=info).
	args := c.args()
	cmd := exec.Command(path, slices.Concat(args[:1], serveFlags(s), args[1:], extra)...)
	cmd.Env = append(environ(), c.Env...)
	tail := &tailBuffer{max: 16 << 10}
	cmd.Stdout = tail
	cmd.Stderr = tail
	if c.Stderr != nil {
		cmd.Stderr = io.MultiWriter(c.Stderr, tail)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	ch := &child{setup: s, cmd: cmd, tail: tail, done: make(chan struct{}), slot: -1}
	go func() {
		ch.waitErr = cmd.Wait()
		close(ch.done)
	}()
	return ch, nil
}

// serveFlags are the flags of `kdelay serve` for s; the rest keeps its
// defaults. With no brokers, serve runs its own embedded broker, on the
// --listen and --data-dir that Args give it. A Setup without a delivery
// leaves serve's default.
func serveFlags(s Setup) []string {
	var flags []string
	if len(s.Brokers) > 0 {
		flags = []string{"--brokers", strings.Join(s.Brokers, ",")}
	}
	if s.Delivery != "" {
		flags = append(flags, "--delivery", string(s.Delivery))
	}
	return append(flags,
		"--topic-prefix", s.Topics.Prefix,
		"--group", s.Group,
		"--mode", string(s.Mode),
		"--levels", strings.Join(s.Levels.Names(), ","),
		"--partitions", strconv.Itoa(int(s.Partitions)),
		"--log-level", "warn",
		// A fleet runs several on one machine: each admin listener on a
		// port of its own.
		"--admin", "127.0.0.1:0",
	)
}

// benchSets names, for each flag of kdelay serve the benchmark sets itself
// (serveFlags), what sets it instead: a --serve-flag for one of them would
// win over the benchmark's while the benchmark went on as if its own held,
// waiting for groups that never form or reading the target the wrong way.
var benchSets = map[string]string{
	"brokers":      "kdelay bench's --brokers",
	"delivery":     "kdelay bench's --delivery",
	"levels":       "kdelay bench's --levels",
	"partitions":   "kdelay bench's --partitions",
	"mode":         "kdelay bench's --modes",
	"topic-prefix": "the benchmark, a fresh one each run",
	"group":        "the benchmark, a fresh one each run",
}

// checkServeFlags refuses a --serve-flag for a setting the benchmark makes
// itself, saying what to use instead.
func checkServeFlags(flags []string) error {
	var errs []error
	for _, f := range flags {
		name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if instead, ok := benchSets[name]; ok && strings.HasPrefix(f, "-") {
			errs = append(errs, fmt.Errorf("serve flag %s: the benchmark sets --%s of every kdelay serve itself; use %s", f, name, instead))
		}
	}
	return errors.Join(errs...)
}

// envPrefix starts the environment variables `kdelay serve` reads (the
// config package's EnvPrefix; only cmd imports config).
const envPrefix = "KDELAY_"

// environ is this process's environment without KDELAY_* variables, so
// that the child runs with exactly the settings the benchmark passes.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	return env
}

type child struct {
	setup   Setup
	cmd     *exec.Cmd
	tail    *tailBuffer
	done    chan struct{}
	waitErr error // set before done is closed
	slot    int   // its place in a fleet, whose instance id it has; -1 outside one

	last Usage // last read from /proc while it ran
}

func (c *child) Topics() kdelay.Topics { return c.setup.Topics }
func (c *child) Group() string         { return c.setup.Group }

func (c *child) Err() error {
	select {
	case <-c.done:
		return fmt.Errorf("kdelay serve exited: %v; its last output:\n%s", c.waitErr, c.tail)
	default:
		return nil
	}
}

func (c *child) Usage() Usage {
	if u, err := procUsage(c.cmd.Process.Pid); err == nil {
		c.last = u
	}
	return c.last
}

// Stop sends SIGTERM, which `kdelay serve` answers with a clean shutdown,
// and kills the child if it is not gone within 30s. The CPU time and peak
// memory come from the kernel's account of the whole life of the child.
func (c *child) Stop() (Usage, error) {
	u := c.Usage()
	if c.Err() != nil {
		return u, c.Err()
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return u, fmt.Errorf("kdelay serve did not stop within 30s of SIGTERM; killed it. Its last output:\n%s", c.tail)
	}
	if final, ok := exitUsage(c.cmd.ProcessState); ok {
		u.CPU, u.PeakRSS = final.CPU, max(final.PeakRSS, u.PeakRSS)
	}
	if c.waitErr != nil {
		return u, fmt.Errorf("kdelay serve: %w; its last output:\n%s", c.waitErr, c.tail)
	}
	return u, nil
}

// kill sends SIGKILL, as a crash or the OOM killer would, and waits up to
// 10s for the child to be gone.
func (c *child) kill() error {
	_ = c.cmd.Process.Kill()
	select {
	case <-c.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("kdelay serve (pid %d) still running 10s after SIGKILL", c.cmd.Process.Pid)
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
