package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// ScaleConfig configures Scale. The zero value of every field is replaced
// by its default in WithDefaults.
type ScaleConfig struct {
	// Brokers, as in Config. Default: an embedded kfake broker.
	Brokers []string

	// Runner starts the forwarder. Default InProcess{}, whose memory and CPU
	// are the whole benchmark's, broker included: use Command to measure
	// the forwarder alone.
	Runner Runner

	// Levels are the forwarder's levels. Default levels.Default().
	Levels levels.Set

	// Pending records wait in the largest level while memory and idle CPU
	// are measured. Default 1,000,000.
	Pending int

	// Burst records are due in the same millisecond. Default 1,000,000.
	Burst int

	// BurstLead is how long after the burst starts being written it is due.
	// Default 30s.
	BurstLead time.Duration

	// Settle is how long the forwarder is left alone before its memory is
	// read, so that the garbage collector and the runtime's scavenger
	// catch up with what it freed. Default 20s.
	Settle time.Duration

	// Idle is how long CPU is measured while records wait. Default 30s.
	Idle time.Duration

	// Delivery, Partitions, Grace, Progress, ClientOpts and Logger are as
	// in Config.
	Delivery   forwarder.Delivery
	Partitions int32
	Grace      time.Duration
	Progress   io.Writer
	ClientOpts []kgo.Opt
	Logger     *slog.Logger
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c ScaleConfig) WithDefaults() ScaleConfig {
	c.Pending = cmp.Or(c.Pending, 1_000_000)
	c.Burst = cmp.Or(c.Burst, 1_000_000)
	c.BurstLead = cmp.Or(c.BurstLead, 30*time.Second)
	c.Settle = cmp.Or(c.Settle, 20*time.Second)
	c.Idle = cmp.Or(c.Idle, 30*time.Second)
	// The rest as a benchmark run has them, which is also what the scale
	// phase runs with.
	run := c.runConfig().WithDefaults()
	c.Runner, c.Levels, c.Partitions, c.Grace, c.Logger = run.Runner, run.Levels, run.Partitions, run.Grace, run.Logger
	c.Delivery = run.Delivery
	return c
}

func (c ScaleConfig) runConfig() Config {
	return Config{
		Brokers: c.Brokers, Runner: c.Runner, Modes: []forwarder.Mode{forwarder.ModeExact}, Delivery: c.Delivery,
		Levels: c.Levels, Partitions: c.Partitions, Grace: c.Grace, Progress: c.Progress, ClientOpts: c.ClientOpts, Logger: c.Logger,
	}
}

func (c ScaleConfig) validate() error {
	errs := []error{validDelivery(c.Delivery)}
	for name, n := range map[string]int{"pending": c.Pending, "burst": c.Burst} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s: %d is negative; give a number of records such as 100000", name, n))
		}
	}
	if _, ok := c.burstLevel(); !ok {
		errs = append(errs, fmt.Errorf("burst-lead: %s is longer than the largest level %s; use a shorter lead", c.BurstLead, c.Levels.Largest().Name))
	}
	return errors.Join(errs...)
}

// burstLevel is the level the burst waits in: the shortest that lasts at
// least BurstLead.
func (c ScaleConfig) burstLevel() (levels.Level, bool) {
	for _, l := range c.Levels {
		if l.Delay >= c.BurstLead {
			return l, true
		}
	}
	return levels.Level{}, false
}

// Scale measures what a forwarder holds and uses with many records pending,
// and how fast it delivers a large burst: it reads the forwarder's resident
// memory with nothing pending, writes Pending records due in the largest
// level's time through the ingress, reads its memory again once they are
// all in that level and it settled, measures its CPU while they wait, then
// delivers Burst records due in the same millisecond.
func Scale(ctx context.Context, cfg ScaleConfig) (*Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, ConfigError{err}
	}
	run := cfg.runConfig()
	c, rep, machineAtStart, err := begin(&run)
	if err != nil {
		return nil, err
	}
	defer c.close()
	res, err := measureScale(ctx, c, &run, &cfg)
	if err != nil {
		return nil, err
	}
	rep.Scale = res
	rep.Machine = machineAtStart.end()
	rep.Elapsed = time.Since(rep.Started)
	rep.Goals = checkGoals(rep)
	return rep, nil
}

func measureScale(ctx context.Context, c *cluster, run *Config, cfg *ScaleConfig) (*ScaleResult, error) {
	p, stop, err := startPhase(ctx, c, run, c.runPrefix+"-scale", forwarder.ModeExact)
	if err != nil {
		return nil, err
	}
	res := &ScaleResult{Pending: cfg.Pending, Burst: cfg.Burst, IdleFor: cfg.Idle}
	err = p.scaleSteps(ctx, cfg, res)
	usage, stopErr := stop()
	if err = errors.Join(err, stopErr); err != nil {
		return nil, fmt.Errorf("scale: %w", err)
	}
	res.Usage = usage
	if g, ok := p.gs[GroupBurst]; ok {
		res.BurstLateness = g.summary()
		res.BurstDrain = g.last.Sub(g.due)
	}
	return res, nil
}

// scaleSteps runs the steps of Scale on a started forwarder.
func (p *phase) scaleSteps(ctx context.Context, cfg *ScaleConfig, res *ScaleResult) error {
	if err := p.warmUp(ctx); err != nil {
		return err
	}
	if err := sleepUntil(ctx, time.Now().Add(cfg.Settle)); err != nil {
		return err
	}
	res.RSSEmpty = p.in.Usage().RSS
	if err := p.writePending(ctx, cfg); err != nil {
		return err
	}
	if err := sleepUntil(ctx, time.Now().Add(cfg.Settle)); err != nil {
		return err
	}
	before := p.in.Usage()
	res.RSSPending, res.PeakPending = before.RSS, before.PeakRSS
	if err := sleepUntil(ctx, time.Now().Add(cfg.Idle)); err != nil {
		return err
	}
	res.IdleCPU = float64(p.in.Usage().CPU-before.CPU) / float64(cfg.Idle)
	return p.bigBurst(ctx, cfg, res)
}

// writePending writes cfg.Pending records through the ingress, due the largest
// level's time after they are written, and returns once the forwarder has
// put them all in the levels: in the largest, or in the next one down for
// those it routed more than a second late on a loaded machine, which it plans
// from when it hops them (forwarder, hopBase). Waiting for all of them in
// the largest level waited out its 10 minutes then.
func (p *phase) writePending(ctx context.Context, cfg *ScaleConfig) error {
	largest := cfg.Levels.Largest()
	bar := startProgress(p.cfg.Progress, "pending", cfg.Pending, func() (int64, int64) { return p.s.sent.Load(), 0 })
	defer bar.stop()
	err := p.s.bulk(ctx, cfg.Pending, func() *kgo.Record {
		ts := time.Now().Truncate(time.Millisecond)
		return delayedRecord(p.s.ingress, p.s.target, []byte("pending"), ts, ts.Add(largest.Delay))
	})
	if err != nil {
		return fmt.Errorf("write %d pending records: %w", cfg.Pending, err)
	}
	var levels []string
	for _, l := range cfg.Levels {
		levels = append(levels, p.in.Topics().Level(l.Name))
	}
	return p.waitInTopics(ctx, levels, int64(cfg.Pending))
}

// waitInTopics returns once topics hold n records together. The pending
// records hop once into the largest level or the next one down, which with
// any levels a scale run uses last minutes, so none is counted twice while
// this waits.
func (p *phase) waitInTopics(ctx context.Context, topics []string, n int64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	for {
		offsets, err := p.c.adm.ListEndOffsets(ctx, topics...)
		var total int64
		offsets.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if err == nil && total >= n {
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(500*time.Millisecond)); err != nil {
			return fmt.Errorf("%d of %d records in %s: %w", total, n, strings.Join(topics, ","), err)
		}
	}
}

// bigBurst writes cfg.Burst records straight into the level that lasts at
// least BurstLead, as kdelay's client library does, timestamped so that
// they all leave it in the same millisecond, and waits until all arrived.
// Writing them through the ingress would time the hops of a million records
// on the way, not the delivery of a million records due at once.
func (p *phase) bigBurst(ctx context.Context, cfg *ScaleConfig, res *ScaleResult) error {
	if cfg.Burst == 0 {
		return nil
	}
	l, _ := cfg.burstLevel()
	topic := p.in.Topics().Level(l.Name)
	g := p.gs.get(GroupBurst)
	start := time.Now()
	due := start.Add(cfg.BurstLead).Truncate(time.Millisecond)
	bar := startProgress(p.cfg.Progress, "burst", cfg.Burst, func() (int64, int64) {
		_, delivered := p.coll.of(g)
		return p.s.sent.Load(), delivered
	})
	defer bar.stop()
	p.s.sent.Store(0)
	err := p.s.bulk(ctx, cfg.Burst, func() *kgo.Record {
		return delayedRecord(topic, p.s.target, p.coll.expect(g), due.Add(-l.Delay), due)
	})
	if err != nil {
		return fmt.Errorf("write the burst: %w", err)
	}
	res.BurstWritten, res.BurstLead = time.Since(start), due.Sub(start)
	return p.coll.wait(ctx, due.Add(p.cfg.Grace))
}
