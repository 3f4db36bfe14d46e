package bench

import (
	"cmp"
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

// Config configures a benchmark run. The zero value of every field is
// replaced by its default in WithDefaults.
type Config struct {
	// Brokers are the seed brokers of the cluster to measure on. Default:
	// none, which starts an embedded kfake broker in this process.
	Brokers []string

	// Runner starts the forwarder under test. Default InProcess{}.
	Runner Runner

	// Modes are the forwarder modes measured, one after the other, on the
	// same workload. The goals compare ModeExact with ModePoll. Default
	// exact, then poll.
	Modes []forwarder.Mode

	// Delivery is the forwarder's delivery, forwarder.AtLeastOnce or
	// forwarder.ExactlyOnce. With ExactlyOnce every consumer the benchmark
	// makes reads with isolation.level=read_committed, as a consumer of a
	// transactional delivery must, so lateness counts the wait for the
	// transaction to commit. Default forwarder.DefaultDelivery,
	// at-least-once. A running forwarder has its own: name it.
	Delivery forwarder.Delivery

	// Levels are the forwarder's delay levels. Default levels.Default().
	Levels levels.Set

	// Workload is what is sent. Default DefaultWorkload(Levels); a Workload
	// that is set is taken as it is, so a zero count turns a part off.
	Workload Workload

	// Partitions of every topic the benchmark and the forwarder create.
	// Default 6.
	Partitions int32

	// Grace is how long after its due time a record may still arrive; later
	// ones count as lost. Default 30s.
	Grace time.Duration

	// Seed makes the random send times repeatable. Default 1.
	Seed uint64

	// Progress receives a progress bar; nil shows none.
	Progress io.Writer

	// ClientOpts are added to every Kafka client the benchmark makes: TLS,
	// SASL. They do not reach a forwarder started by Command.
	ClientOpts []kgo.Opt

	// Logger receives the benchmark's logs. Default: discard.
	Logger *slog.Logger
}

// Workload says what is sent in each mode. Records of one part are due at
// different times, spread over Spread, so that they measure lateness rather
// than a queue; the burst measures the queue.
type Workload struct {
	// Levels name the levels that get PerLevel records each, with a delay
	// of exactly the level: one hop, no remainder.
	Levels   []string
	PerLevel int

	// Delays get PerDelay records each: delays that take several hops and
	// leave a remainder below the smallest level, held in memory.
	Delays   []time.Duration
	PerDelay int

	// Spread is how long the records of Levels and Delays take to send, at
	// random times.
	Spread time.Duration

	// Rate records per second are sent for RateFor, each with RateDelay.
	Rate      int
	RateFor   time.Duration
	RateDelay time.Duration

	// Burst records are sent at once, all due in the same millisecond,
	// BurstLead after the first is sent.
	Burst     int
	BurstLead time.Duration

	// Copy records are forwarded at full speed, by kdelay and by a raw
	// consume→produce copy, to compare their throughput, CopyRuns times
	// each (at least once).
	Copy     int
	CopyRuns int
}

// DefaultWorkload is every level up to a minute with 200 records each, four
// multi-hop delays with 100 each, 200 records/s for 20s, a burst of 10,000
// and three runs of 1,000,000 records for the throughput comparison. The two
// modes and the comparison take about 7 minutes on the embedded broker, each
// mode bound by the longest delay, 3m17s.
//
// A million, not fewer: the raw copy moved 100,000 records in 45 ms on the
// embedded broker, a window shorter than what starts each side (the copy's
// first fetches are in hand before its first write is timed; kdelay's new
// process grows its heap), so it measured start-up, not a rate. From a million
// up the windows last seconds and the ratio holds (docs/BENCHMARKS.md,
// "Throughput: what limits it").
func DefaultWorkload(set levels.Set) Workload {
	var names []string
	for _, l := range set {
		if l.Delay <= time.Minute {
			names = append(names, l.Name)
		}
	}
	return Workload{
		Levels:    names,
		PerLevel:  200,
		Delays:    []time.Duration{1400 * time.Millisecond, 7300 * time.Millisecond, 75 * time.Second, 3*time.Minute + 17*time.Second},
		PerDelay:  100,
		Spread:    10 * time.Second,
		Rate:      200,
		RateFor:   20 * time.Second,
		RateDelay: time.Second,
		Burst:     10_000,
		BurstLead: 5 * time.Second,
		Copy:      1_000_000,
		CopyRuns:  3,
	}
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.Runner == nil {
		c.Runner = InProcess{}
	}
	if _, attached := c.Runner.(Running); attached && len(c.Modes) == 0 {
		c.Modes = []forwarder.Mode{forwarder.ModeExact}
	}
	if len(c.Modes) == 0 {
		c.Modes = []forwarder.Mode{forwarder.ModeExact, forwarder.ModePoll}
	}
	c.Delivery = cmp.Or(c.Delivery, forwarder.DefaultDelivery)
	if len(c.Levels) == 0 {
		c.Levels = levels.Default()
	}
	if c.Workload.zero() {
		c.Workload = DefaultWorkload(c.Levels)
	}
	c.Partitions = cmp.Or(c.Partitions, 6)
	c.Grace = cmp.Or(c.Grace, 30*time.Second)
	c.Seed = cmp.Or(c.Seed, 1)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (w Workload) zero() bool {
	return len(w.Levels) == 0 && w.PerLevel == 0 && len(w.Delays) == 0 && w.PerDelay == 0 && w.Spread == 0 &&
		w.Rate == 0 && w.RateFor == 0 && w.RateDelay == 0 && w.Burst == 0 && w.BurstLead == 0 && w.Copy == 0 && w.CopyRuns == 0
}

// ConfigError is a configuration Run, Scale, Faults or Commands refuses
// before it starts anything: a caller's mistake, which a command line
// reports as a usage error.
type ConfigError struct{ Err error }

func (e ConfigError) Error() string { return e.Err.Error() }
func (e ConfigError) Unwrap() error { return e.Err }

func (c Config) validate() error {
	var errs []error
	for _, m := range c.Modes {
		if m != forwarder.ModeExact && m != forwarder.ModePoll {
			errs = append(errs, fmt.Errorf("modes: %q is not a mode; use %q or %q", m, forwarder.ModeExact, forwarder.ModePoll))
		}
	}
	errs = append(errs, validDelivery(c.Delivery))
	if _, attached := c.Runner.(Running); attached && len(c.Modes) != 1 {
		errs = append(errs, fmt.Errorf("modes: a running forwarder has one mode; name the one it runs, not %v", c.Modes))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d; use at least 1", c.Partitions))
	}
	return errors.Join(append(errs, c.Workload.validate(c.Levels))...)
}

// validDelivery is nil for a delivery the forwarder has, else an error
// that names them.
func validDelivery(d forwarder.Delivery) error {
	if d != forwarder.AtLeastOnce && d != forwarder.ExactlyOnce {
		return fmt.Errorf("delivery: %q is not a delivery; use %q or %q", d, forwarder.AtLeastOnce, forwarder.ExactlyOnce)
	}
	return nil
}

// readOpts are the options of every consumer that reads what the forwarder
// delivered: a transactional delivery is read committed, as its users must.
func readOpts(d forwarder.Delivery) []kgo.Opt {
	if d == forwarder.ExactlyOnce {
		return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}
	}
	return nil
}

func (w Workload) validate(set levels.Set) error {
	var errs []error
	for _, name := range w.Levels {
		if !slices.Contains(set.Names(), name) {
			errs = append(errs, fmt.Errorf("levels: %q is not one of the forwarder's levels %v; pick from those", name, set.Names()))
		}
	}
	for _, d := range w.Delays {
		if d < 0 {
			errs = append(errs, fmt.Errorf("delays: %s is negative; use a delay of 0 or more", d))
		}
	}
	counts := map[string]int{"per-level": w.PerLevel, "per-delay": w.PerDelay, "rate": w.Rate, "burst": w.Burst, "copy": w.Copy}
	for name, n := range counts {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s: %d is negative; use 0 to leave that part out", name, n))
		}
	}
	if w.steady() > 0 && len(w.Levels)+len(w.Delays) > 0 && w.Spread <= 0 {
		errs = append(errs, errors.New("spread: must be positive, e.g. 10s, when records per level or per delay are sent"))
	}
	if w.Rate > 0 && w.RateFor <= 0 {
		errs = append(errs, fmt.Errorf("rate-for: %s; say how long to send %d records/s, e.g. 20s", w.RateFor, w.Rate))
	}
	return errors.Join(errs...)
}

// steady is how many records the parts other than the burst send: those
// whose lateness the goals are checked on.
func (w Workload) steady() int {
	return len(w.Levels)*w.PerLevel + len(w.Delays)*w.PerDelay + rateCount(w)
}
