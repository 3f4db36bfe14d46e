package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// GroupOccurrences are the occurrences of a schedules run's timed
// schedules due after its warm-up, whose lateness counts.
const GroupOccurrences = "occurrences"

// SchedulesConfig configures Schedules. The zero value of every field is
// replaced by its default in WithDefaults.
type SchedulesConfig struct {
	// Brokers are the seed brokers of the cluster to run on. Default: none,
	// and the embedded broker runs as a kdelay serve of its own beside the
	// one under test, as in a sweep (soakBroker says why): the schedules
	// records are the broker's memory, not serve's.
	Brokers []string

	// Runner starts the kdelay serve under test: Command, a child process
	// (default Command{}), or InProcess, the forwarder and a scheduler in
	// the benchmark's own process, whose memory is then the process's and
	// is shown as shared (for tests).
	Runner Runner

	// Schedules are the schedules in force while serve's memory is read:
	// Timed of them fire every Every, the rest once a day, at an hour at
	// least eleven hours away, so that none of them fires in the run.
	// Default 1,000,000.
	Schedules int

	// Timed schedules, @every Every, whose occurrences are timed against
	// the floor. Default 100.
	Timed int

	// Every is the interval of the timed schedules, whole seconds. Default
	// 1s.
	Every time.Duration

	// For is how long the occurrences are timed. Default 30s.
	For time.Duration

	// Warmup is the start of the timed span whose occurrences count for
	// loss and earliness only: a new schedule writes its first minute of
	// occurrences at once. Default 5s.
	Warmup time.Duration

	// Settle is how long serve is left alone once it has loaded the
	// schedules before its memory is read, so that the garbage collector
	// catches up with what loading freed. Default 10s.
	Settle time.Duration

	// Interval is the time between two reads of serve's memory from /proc,
	// from its start to its end. Default 500ms. The peak is the kernel's
	// high-water mark (VmHWM), so no peak falls between two reads.
	Interval time.Duration

	// Levels, Partitions, Delivery and Grace are as in Config; Partitions
	// are the schedules topic's too; Grace is how long after the run the
	// occurrences due within it may still arrive.
	Levels     levels.Set
	Partitions int32
	Delivery   forwarder.Delivery
	Grace      time.Duration

	// ServeFlags are added to the command line of the kdelay serve started
	// by Command.
	ServeFlags []string

	// Progress receives a line as each step starts; nil shows none.
	Progress io.Writer

	// ClientOpts are added to every Kafka client of the benchmark: TLS,
	// SASL. They do not reach a kdelay serve started by Command.
	ClientOpts []kgo.Opt

	// Logger receives the benchmark's logs. Default: discard.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c SchedulesConfig) WithDefaults() SchedulesConfig {
	if c.Runner == nil {
		c.Runner = Command{}
	}
	c.Schedules = cmp.Or(c.Schedules, 1_000_000)
	c.Timed = cmp.Or(c.Timed, 100)
	c.Every = cmp.Or(c.Every, time.Second)
	c.For = cmp.Or(c.For, 30*time.Second)
	c.Warmup = cmp.Or(c.Warmup, 5*time.Second)
	c.Settle = cmp.Or(c.Settle, 10*time.Second)
	c.Interval = cmp.Or(c.Interval, 500*time.Millisecond)
	if len(c.Levels) == 0 {
		c.Levels = levels.Default()
	}
	c.Partitions = cmp.Or(c.Partitions, 6)
	c.Delivery = cmp.Or(c.Delivery, forwarder.DefaultDelivery)
	c.Grace = cmp.Or(c.Grace, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c SchedulesConfig) validate() error {
	errs := []error{validDelivery(c.Delivery), checkServeFlags(c.ServeFlags)}
	switch c.Runner.(type) {
	case Command, InProcess:
	default:
		errs = append(errs, fmt.Errorf("runner: %s cannot be started with the schedules; run a child kdelay serve (the default)", c.Runner))
	}
	if c.Timed < 1 || c.Schedules < c.Timed {
		errs = append(errs, fmt.Errorf("schedules %d, timed %d: time at least one, and no more than there are schedules, e.g. --schedules 100000 --timed 100", c.Schedules, c.Timed))
	}
	if c.Every < time.Second || c.Every%time.Second != 0 {
		errs = append(errs, fmt.Errorf("every: %s; use whole seconds, e.g. 1s", c.Every))
	}
	if c.Interval <= 0 || c.Warmup < 0 || c.Settle < 0 || c.For <= c.Warmup {
		errs = append(errs, fmt.Errorf("for %s, warmup %s, settle %s, interval %s: use positive durations, and a warm-up shorter than for", c.For, c.Warmup, c.Settle, c.Interval))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d; use at least 1", c.Partitions))
	}
	return errors.Join(errs...)
}

// soak is the SoakConfig whose start and close a schedules run shares: a
// kdelay serve (and a broker of its own) and a reader of its target.
func (c *SchedulesConfig) soak() SoakConfig {
	return SoakConfig{
		Brokers: c.Brokers, Runner: c.Runner, Levels: c.Levels, Partitions: c.Partitions, Delivery: c.Delivery,
		Grace: c.Grace, ServeFlags: c.ServeFlags, ClientOpts: c.ClientOpts, Logger: c.Logger,
	}
}

// Schedules measures recurring schedules on a fresh kdelay serve: its
// resident memory before any schedule, and with cfg.Schedules in force
// once it has loaded them and settled, and its peak over the run; and the
// lateness of cfg.Timed schedules' occurrences over cfg.For, beside the
// floor: for each occurrence, a plain timer that produces a record to the
// same target at its time, read by the same consumer.
func Schedules(ctx context.Context, cfg SchedulesConfig) (*SchedulesReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, ConfigError{err}
	}
	machine := startMachine()
	sc := cfg.soak()
	r := &schedulesRun{cfg: &cfg, soak: &soakRun{cfg: &sc}}
	rep := newSchedulesReport(&cfg)
	err := r.run(ctx, rep)
	err = errors.Join(err, r.close(rep))
	if err != nil {
		return nil, err
	}
	rep.end(machine.end())
	return rep, nil
}
