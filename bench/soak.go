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

	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// SoakConfig configures Soak. The zero value of every field is replaced by
// its default in WithDefaults.
type SoakConfig struct {
	// Brokers are the seed brokers of the cluster to run on. Default: none,
	// and the embedded broker runs as a kdelay serve of its own, sampled
	// beside the one under test (soakBroker says why).
	Brokers []string

	// Runner starts the kdelay serve under test: Command, a child process
	// (default Command{}), or Running, one already running. InProcess does
	// not do: its memory would be the benchmark's.
	Runner Runner

	// Admin is the admin listener (host:port) of a Running kdelay serve,
	// whose /metrics is sampled. Default admin.DefaultAddr, serve's own
	// default. A child started by Command gets a free port of its own.
	Admin string

	// Rate is records per second written to the ingress. Default 1000.
	Rate int

	// MinDelay and MaxDelay bound each record's delay, drawn log-uniformly
	// between them so that every level in the range gets a share (a
	// uniform draw would put nine records in ten in the minute levels).
	// Records due after the run are left pending. Default 300ms and 200s:
	// remainders held in memory, every level up to 3m, and hops.
	MinDelay, MaxDelay time.Duration

	// Duration is how long records are written and samples taken.
	// Default 1h.
	Duration time.Duration

	// Interval is the time between samples. Default 10s.
	Interval time.Duration

	// Warmup is the start of the run left out of the slopes. Deliveries
	// ramp up to the rate of writes only once the longest delays fall due,
	// and the forwarder's memory with them: each level it fills buffers
	// what is due next once its first records are (measured: the live
	// heap grew until about MaxDelay into the run, then stayed flat).
	// Default a tenth of Duration, at least 2m and MaxDelay, at most half
	// of Duration: a run too short for that is warned of in its report.
	Warmup time.Duration

	// MaxGrowth is the growth of resident memory and of the live heap, in
	// MB (2^20 bytes) per hour after the warm-up, above which the soak
	// fails, once told apart from noise (see growthGoal). Default 1, the
	// goal for a one-hour run at 1,000 records/s.
	MaxGrowth float64

	// Levels, Partitions, Delivery and Grace are as in Config; Grace is
	// how long after the run the records due within it may still arrive.
	Levels     levels.Set
	Partitions int32
	Delivery   forwarder.Delivery
	Grace      time.Duration

	// ServeFlags are added to the command line of the kdelay serve
	// started by Command, e.g. --retention=3h.
	ServeFlags []string

	// Seed makes the random delays repeatable. Default 1.
	Seed uint64

	// Progress receives a line per sample; nil shows none.
	Progress io.Writer

	// ClientOpts are added to every Kafka client of the benchmark: TLS,
	// SASL. They do not reach a kdelay serve started by Command.
	ClientOpts []kgo.Opt

	// Logger receives the benchmark's logs. Default: discard.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c SoakConfig) WithDefaults() SoakConfig {
	if c.Runner == nil {
		c.Runner = Command{}
	}
	c.Admin = cmp.Or(c.Admin, admin.DefaultAddr)
	c.Rate = cmp.Or(c.Rate, 1000)
	c.MinDelay = cmp.Or(c.MinDelay, 300*time.Millisecond)
	c.MaxDelay = cmp.Or(c.MaxDelay, 200*time.Second)
	c.Duration = cmp.Or(c.Duration, time.Hour)
	c.Interval = cmp.Or(c.Interval, 10*time.Second)
	c.Warmup = cmp.Or(c.Warmup, min(max(c.Duration/10, 2*time.Minute, c.MaxDelay), c.Duration/2))
	c.MaxGrowth = cmp.Or(c.MaxGrowth, 1)
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

// minSlopeSamples is the fewest samples after the warm-up a slope is
// worked out from.
const minSlopeSamples = 5

func (c SoakConfig) validate() error {
	errs := []error{validDelivery(c.Delivery), checkServeFlags(c.ServeFlags)}
	switch c.Runner.(type) {
	case Command:
	case Running:
		if len(c.Brokers) == 0 {
			errs = append(errs, errors.New("runner: a running kdelay serve is soaked on its cluster; give its brokers (its own embedded broker's address, if it runs one)"))
		}
	default:
		errs = append(errs, fmt.Errorf("runner: %s runs in the benchmark's own process, whose memory is not kdelay serve's; run a child kdelay serve (the default) or attach to a running one", c.Runner))
	}
	if c.Rate < 1 {
		errs = append(errs, fmt.Errorf("rate: %d; use at least 1 record per second", c.Rate))
	}
	if c.MinDelay <= 0 || c.MaxDelay < c.MinDelay {
		errs = append(errs, fmt.Errorf("min-delay %s, max-delay %s: delays are drawn log-uniformly between them; use 0 < min-delay ≤ max-delay, e.g. 300ms and 200s", c.MinDelay, c.MaxDelay))
	}
	if c.Interval <= 0 || c.Warmup < 0 || c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %s, warmup %s, interval %s: use positive durations", c.Duration, c.Warmup, c.Interval))
	} else if after := (c.Duration - c.Warmup) / c.Interval; after < minSlopeSamples {
		errs = append(errs, fmt.Errorf("duration %s less warmup %s holds %d samples %s apart; a slope needs %d: lengthen duration, or shorten warmup or interval",
			c.Duration, c.Warmup, after, c.Interval, minSlopeSamples))
	}
	if c.MaxGrowth < 0 {
		errs = append(errs, fmt.Errorf("max-growth: %g MB/h is negative; use e.g. 1", c.MaxGrowth))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d; use at least 1", c.Partitions))
	}
	return errors.Join(errs...)
}

// Soak runs a kdelay serve under a steady load for cfg.Duration and samples
// its process every Interval: memory, goroutines, open files, TCP
// connections, CPU, and the lateness of what it delivered beside the
// machine's floor. After the warm-up it fits the growth of each figure per
// hour, and checks that memory does not grow beyond MaxGrowth, and that no
// record due within the run came early or was lost.
//
// A run that breaks off (the kdelay serve under test exits, say, killed for
// its memory) still reports what it sampled, with Error set. Soak returns
// an error only for what stops it from starting.
func Soak(ctx context.Context, cfg SoakConfig) (*SoakReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, ConfigError{err}
	}
	r := &soakRun{cfg: &cfg, machine: startMachine()}
	defer func() { _ = r.close() }() // what start left running if it failed; after finish, nothing
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r.finish(r.run(ctx, r.record)), nil
}
