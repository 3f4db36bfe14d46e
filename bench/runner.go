package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// Runner starts the forwarder under test.
type Runner interface {
	Start(ctx context.Context, s Setup) (Instance, error)
	String() string // how the forwarder runs, for the report
}

// Setup is what a forwarder under test is started with: topics and groups
// of its own, so that runs never see each other's records.
type Setup struct {
	Brokers    []string
	Topics     kdelay.Topics
	Group      string
	Mode       forwarder.Mode
	Delivery   forwarder.Delivery
	Levels     levels.Set
	Partitions int32
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
}

// forwarderConfig is the forwarder.Config of s; the rest keeps the
// library's defaults, as `kdelay serve` keeps its own.
func (s Setup) forwarderConfig() forwarder.Config {
	return forwarder.Config{
		Brokers: s.Brokers, Topics: s.Topics, Group: s.Group, Mode: s.Mode, Delivery: s.Delivery, Levels: s.Levels,
		Partitions: s.Partitions, ClientOpts: s.ClientOpts, Logger: s.Logger,
	}
}

// Instance is a forwarder under test, running.
type Instance interface {
	// Topics and Group are those the forwarder uses: the Setup's, or those
	// of a forwarder that was already running.
	Topics() kdelay.Topics
	Group() string
	// Usage is what its process used so far.
	Usage() Usage
	// Err is non-nil once the forwarder stopped by itself.
	Err() error
	// Stop stops the forwarder, waits for it and returns what it used.
	Stop() (Usage, error)
}

// InProcess runs the forwarder in the benchmark's process, as a goroutine:
// nothing to build, but its CPU time and memory are the process's, broker
// included.
type InProcess struct{}

func (InProcess) String() string { return "in-process" }

// Start runs forwarder.New(...).Run in a goroutine and returns once it is
// Ready.
func (InProcess) Start(ctx context.Context, s Setup) (Instance, error) {
	f, err := forwarder.New(s.forwarderConfig())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	in := &goroutineForwarder{setup: s, cancel: cancel, done: make(chan struct{}), cpuAtStart: selfCPU()}
	go func() {
		err := f.Run(ctx)
		in.mu.Lock()
		in.err = err
		in.mu.Unlock()
		close(in.done)
	}()
	select {
	case <-f.Ready():
		return in, nil
	case <-in.done:
		return nil, fmt.Errorf("forwarder stopped before it was ready: %w", in.Err())
	}
}

// goroutineForwarder is a forwarder InProcess started: a goroutine of this
// process, whose CPU time is the process's since it started.
type goroutineForwarder struct {
	setup      Setup
	cancel     context.CancelFunc
	done       chan struct{}
	cpuAtStart time.Duration // CPU time of the process when the forwarder started

	mu  sync.Mutex
	err error
}

func (in *goroutineForwarder) Topics() kdelay.Topics { return in.setup.Topics }
func (in *goroutineForwarder) Group() string         { return in.setup.Group }

func (in *goroutineForwarder) Err() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.err == nil {
		select {
		case <-in.done:
			return errors.New("forwarder stopped")
		default:
		}
	}
	return in.err
}

func (in *goroutineForwarder) Usage() Usage {
	u, err := procUsage(os.Getpid())
	u.Measured = err == nil
	u.CPU = selfCPU() - in.cpuAtStart
	u.Shared = true
	return u
}

func (in *goroutineForwarder) Stop() (Usage, error) {
	in.cancel()
	<-in.done
	u := in.Usage()
	in.mu.Lock()
	defer in.mu.Unlock()
	return u, in.err
}
