package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// SweepConfig configures Sweep. The zero value of every field is replaced
// by its default in WithDefaults.
type SweepConfig struct {
	// Brokers are the seed brokers of the cluster to run on. Default: none,
	// and each rate gets a fresh embedded broker, run as a kdelay serve of
	// its own beside the one under test (soakBroker says why).
	Brokers []string

	// Runner starts the kdelay serve under test, a fresh one for each rate:
	// Command, a child process (default Command{}), or InProcess, the
	// forwarder in the benchmark's own process, whose memory and CPU are
	// then the whole process's and are not judged (for tests).
	Runner Runner

	// Rates are the records per second written to the ingress, one run
	// each, in increasing order. Default 1000, 5000, 10000, 20000 and
	// 50000.
	Rates []int

	// HalfMax first measures kdelay's forwarding rate over MaxRecords
	// records all due at once (as `kdelay bench --copy` does), and adds
	// half of it to Rates: the goal holds lateness at the floor up to
	// there. Default false.
	HalfMax bool

	// MaxRecords is how many records HalfMax measures over. Default
	// 1,000,000: over fewer, the window is too short to be a rate
	// (DefaultWorkload says why).
	MaxRecords int

	// For is how long each rate is written. Default 30s.
	For time.Duration

	// MinDelay and MaxDelay bound each record's delay, drawn
	// log-uniformly between them. Default 100ms and 10s: remainders held
	// in memory below the smallest level, the 1s and 5s levels, and hops
	// through both.
	MinDelay, MaxDelay time.Duration

	// Warmup is the start of each run whose records are judged for loss
	// and earliness but not for lateness: only records due at least
	// Warmup after the load started count. In its first seconds the
	// writer's and the forwarder's clients open connections and fetch
	// sessions, and kdelay serve's heap grows from nothing: costs paid
	// once, not at the rate. By due time, not send time: a record sent
	// early and due late is forwarded by a warm serve. Default 5s.
	Warmup time.Duration

	// Interval is the time between two reads of /proc for the processes'
	// memory and CPU. Default 500ms. The peak is the kernel's own
	// high-water mark (VmHWM, and the rusage of the exited process), so
	// no peak falls between two reads.
	Interval time.Duration

	// Levels, Partitions, Delivery and Grace are as in Config; Grace is
	// how long after a run the records due within it may still arrive.
	Levels     levels.Set
	Partitions int32
	Delivery   forwarder.Delivery
	Grace      time.Duration

	// P99OverFloor and MaxOverFloor are the goals on lateness above the
	// floor's, per rate: p99 less the floor's p99, max less the floor's
	// max. Default 5ms and 50ms, the product's goals; CI, on a machine it
	// shares, judges looser ones that still tell seconds from the floor.
	P99OverFloor, MaxOverFloor time.Duration

	// ServeFlags are added to the command line of every kdelay serve
	// started by Command, e.g. --max-buffered-bytes=512MiB.
	ServeFlags []string

	// Seed makes the random delays repeatable: every rate draws the same
	// ones. Default 1.
	Seed uint64

	// Progress receives a line as each rate starts and ends; nil shows
	// none.
	Progress io.Writer

	// ClientOpts are added to every Kafka client of the benchmark: TLS,
	// SASL. They do not reach a kdelay serve started by Command.
	ClientOpts []kgo.Opt

	// Logger receives the benchmark's logs. Default: discard.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c SweepConfig) WithDefaults() SweepConfig {
	if c.Runner == nil {
		c.Runner = Command{}
	}
	if len(c.Rates) == 0 {
		c.Rates = []int{1000, 5000, 10000, 20000, 50000}
	}
	c.MaxRecords = cmp.Or(c.MaxRecords, 1_000_000)
	c.For = cmp.Or(c.For, 30*time.Second)
	c.MinDelay = cmp.Or(c.MinDelay, 100*time.Millisecond)
	c.MaxDelay = cmp.Or(c.MaxDelay, 10*time.Second)
	c.Warmup = cmp.Or(c.Warmup, 5*time.Second)
	c.Interval = cmp.Or(c.Interval, 500*time.Millisecond)
	c.P99OverFloor = cmp.Or(c.P99OverFloor, sweepP99OverFloor)
	c.MaxOverFloor = cmp.Or(c.MaxOverFloor, sweepMaxOverFloor)
	if len(c.Levels) == 0 {
		c.Levels = levels.Default()
	}
	c.Partitions = cmp.Or(c.Partitions, 6)
	c.Delivery = cmp.Or(c.Delivery, forwarder.DefaultDelivery)
	c.Grace = cmp.Or(c.Grace, 30*time.Second)
	c.Seed = cmp.Or(c.Seed, 1)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c SweepConfig) validate() error {
	errs := []error{validDelivery(c.Delivery), checkServeFlags(c.ServeFlags)}
	switch c.Runner.(type) {
	case Command, InProcess:
	default:
		errs = append(errs, fmt.Errorf("runner: %s cannot be started afresh for each rate; run a child kdelay serve (the default)", c.Runner))
	}
	for _, r := range c.Rates {
		if r < 1 {
			errs = append(errs, fmt.Errorf("rates: %d; use at least 1 record per second", r))
		}
	}
	if c.HalfMax && c.MaxRecords < 1 {
		errs = append(errs, fmt.Errorf("max-records: %d; use at least 1, e.g. 1000000", c.MaxRecords))
	}
	if c.MinDelay <= 0 || c.MaxDelay < c.MinDelay {
		errs = append(errs, fmt.Errorf("min-delay %s, max-delay %s: delays are drawn log-uniformly between them; use 0 < min-delay ≤ max-delay, e.g. 100ms and 10s", c.MinDelay, c.MaxDelay))
	}
	if c.Interval <= 0 || c.Warmup < 0 || c.For <= c.Warmup {
		errs = append(errs, fmt.Errorf("for %s, warmup %s, interval %s: use positive durations, and a warm-up shorter than for", c.For, c.Warmup, c.Interval))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d; use at least 1", c.Partitions))
	}
	return errors.Join(errs...)
}

// Sweep runs a kdelay serve under a steady load at each of cfg.Rates in
// turn, each on a fresh kdelay serve (and a fresh embedded broker without
// Brokers) for cfg.For, and reports for each rate the lateness of what it
// delivered beside the machine's floor in the same run, what was lost or
// early, and the peak memory and CPU of its processes; then checks the
// goals (sweepGoals). With HalfMax it first measures the maximum
// forwarding rate and adds half of it to the rates.
//
// A rate whose run breaks off (its kdelay serve exits, say, killed for its
// memory) is reported with Error set, and the sweep goes on to the next.
// When ctx ends, the rows so far are reported, the last with Error set.
// Sweep returns an error only for what stops it from starting.
func Sweep(ctx context.Context, cfg SweepConfig) (*SweepReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, ConfigError{err}
	}
	machine, progress := startMachine(), progressOr(cfg.Progress)
	rep := newSweepReport(&cfg)
	rates := cfg.Rates
	if cfg.HalfMax {
		fmt.Fprintf(progress, "sweep: measuring the maximum forwarding rate over %d records due at once\n", cfg.MaxRecords)
		top, err := maxRate(ctx, &cfg)
		if err != nil {
			return nil, fmt.Errorf("measure the maximum forwarding rate: %w", err)
		}
		rep.MaxRate, rep.MaxRecords = top, cfg.MaxRecords
		fmt.Fprintf(progress, "sweep: %.0f records/s; adding half of it, %d/s\n", top, halfRate(top))
		rates = append(slices.Clone(rates), halfRate(top))
	}
	rates = sortedRates(rates)
	for i, rate := range rates {
		fmt.Fprintf(progress, "sweep %d/%d: %d records/s for %s on a fresh kdelay serve\n", i+1, len(rates), rate, cfg.For)
		row := sweepRate(ctx, &cfg, rate)
		rep.Rows = append(rep.Rows, row)
		writeSweepProgress(progress, row)
		if ctx.Err() != nil {
			break // the row says why
		}
	}
	rep.Goals = sweepGoals(rep.Rows, cfg.P99OverFloor, cfg.MaxOverFloor)
	rep.end(machine.end())
	return rep, nil
}

// halfRate is half of a measured rate, in whole records per second, at
// least 1.
func halfRate(rate float64) int { return int(max(rate/2, 1)) }

// sortedRates are rates in increasing order, each once.
func sortedRates(rates []int) []int {
	return slices.Compact(slices.Sorted(slices.Values(rates)))
}

// progressOr is w, or io.Discard for none.
func progressOr(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
