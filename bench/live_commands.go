package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	kfleet "github.com/kdelay/kdelay/fleet"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// CommandsConfig configures Commands. The zero value of every field is
// replaced by its default in WithDefaults.
type CommandsConfig struct {
	// Brokers, Runner and Levels are as in ScaleConfig: use Command to
	// measure the forwarder's memory alone.
	Brokers []string
	Runner  Runner
	Levels  levels.Set

	// Commands is how many cancels are live: each for an id no record has,
	// so none is ever matched and every one is kept for its whole ttl, as
	// a cancel for a record already delivered is. Default 1,000,000.
	Commands int

	// Settle is how long the forwarder is left alone before its memory is
	// read. Default 20s.
	Settle time.Duration

	// Workload is what is sent, with no command live and then with
	// Commands live, to compare lateness. Default: 200 records in each
	// level up to 10s, each with a floor twin, spread over 20s, and 100
	// records/s for 20s due after 1.4s (two hops and a remainder).
	Workload Workload

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
func (c CommandsConfig) WithDefaults() CommandsConfig {
	c.Commands = cmp.Or(c.Commands, 1_000_000)
	c.Settle = cmp.Or(c.Settle, 20*time.Second)
	run := c.runConfig().WithDefaults()
	c.Runner, c.Levels, c.Partitions, c.Grace, c.Logger, c.Delivery = run.Runner, run.Levels, run.Partitions, run.Grace, run.Logger, run.Delivery
	if c.Workload.steady() == 0 {
		c.Workload = commandsWorkload(c.Levels)
	}
	return c
}

func commandsWorkload(set levels.Set) Workload {
	var names []string
	for _, l := range set {
		if l.Delay <= 10*time.Second {
			names = append(names, l.Name)
		}
	}
	return Workload{
		Levels: names, PerLevel: 200, Spread: 20 * time.Second,
		Rate: 100, RateFor: 20 * time.Second, RateDelay: 1400 * time.Millisecond,
	}
}

func (c CommandsConfig) runConfig() Config {
	return Config{
		Brokers: c.Brokers, Runner: c.Runner, Modes: []forwarder.Mode{forwarder.ModeExact}, Delivery: c.Delivery,
		Levels: c.Levels, Workload: c.Workload, Partitions: c.Partitions, Grace: c.Grace, Progress: c.Progress,
		ClientOpts: c.ClientOpts, Logger: c.Logger,
	}
}

func (c CommandsConfig) validate() error {
	errs := []error{validDelivery(c.Delivery), c.Workload.validate(c.Levels)}
	if c.Commands < 0 {
		errs = append(errs, fmt.Errorf("commands: %d is negative; give a number of live cancels such as 1000000", c.Commands))
	}
	return errors.Join(errs...)
}

// Commands measures what live commands cost a forwarder: its resident
// memory and the lateness of ordinary records with no command live, then the
// time it takes to start with Commands cancels in the control topic, and
// its memory and the same records' lateness with them all live, beside the
// machine's floor each time.
func Commands(ctx context.Context, cfg CommandsConfig) (*Report, error) {
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
	name := c.runPrefix + "-commands"
	p, stop, err := startPhase(ctx, c, &run, name, forwarder.ModeExact)
	if err != nil {
		return nil, err
	}
	res := &CommandsResult{Commands: cfg.Commands}
	err = p.commandSteps(ctx, &cfg, name, res)
	usage, stopErr := stop()
	if err = errors.Join(err, stopErr); err != nil {
		return nil, fmt.Errorf("commands: %w", err)
	}
	res.Usage = usage
	rep.Commands = res
	rep.Machine = machineAtStart.end()
	rep.Elapsed = time.Since(rep.Started)
	rep.Goals = checkGoals(rep)
	return rep, nil
}

// commandSteps runs the steps of Commands on a started forwarder.
func (p *phase) commandSteps(ctx context.Context, cfg *CommandsConfig, name string, res *CommandsResult) error {
	var err error
	if res.RSSNone, res.None, err = p.settleAndMeasure(ctx, cfg, "no commands"); err != nil {
		return err
	}
	// A restart with the control topic empty, for what starting takes
	// without commands: joining groups, mostly.
	if res.ReadyEmpty, err = p.restart(ctx, name); err != nil {
		return err
	}
	if err := p.in.Err(); err != nil {
		return err
	}
	if _, err := p.in.Stop(); err != nil {
		return fmt.Errorf("stop the forwarder: %w", err)
	}
	if err := p.writeCancels(ctx, cfg.Commands); err != nil {
		return err
	}
	if res.ReadyLoaded, err = p.restart(ctx, name); err != nil {
		return err
	}
	res.RSSLive, res.Live, err = p.settleAndMeasure(ctx, cfg, strconv.Itoa(cfg.Commands)+" live")
	return err
}

// settleAndMeasure warms the forwarder up, reads its memory once it
// settled, and sends the workload.
func (p *phase) settleAndMeasure(ctx context.Context, cfg *CommandsConfig, title string) (int64, []Group, error) {
	if err := p.warmUp(ctx); err != nil {
		return 0, nil, err
	}
	if err := sleepUntil(ctx, time.Now().Add(cfg.Settle)); err != nil {
		return 0, nil, err
	}
	rss := p.in.Usage().RSS
	p.gs = groups{}
	sends := plan(cfg.Workload, cfg.Levels, 1, p.gs)
	_, before := p.coll.counts()
	bar := startProgress(cfg.Progress, title, len(sends), func() (int64, int64) {
		_, arrived := p.coll.counts()
		return int64(len(sends)), int64(arrived - before)
	})
	defer bar.stop()
	if err := p.steady(ctx, sends); err != nil {
		return 0, nil, err
	}
	var out []Group
	for _, g := range p.gs.summaries() {
		if g.Name == GroupSteady || g.Name == GroupFloor {
			out = append(out, g)
		}
	}
	return rss, out, nil
}

// restart stops the forwarder if it runs, starts it again on the same
// topics and groups, and returns how long it took from start to ready:
// every command in the control topic loaded, every group joined.
func (p *phase) restart(ctx context.Context, name string) (time.Duration, error) {
	if p.in.Err() == nil {
		if _, err := p.in.Stop(); err != nil {
			return 0, fmt.Errorf("stop the forwarder: %w", err)
		}
	}
	start := time.Now()
	in, err := p.cfg.Runner.Start(ctx, p.c.forwarderSetup(p.cfg, name, forwarder.ModeExact))
	if err != nil {
		return 0, fmt.Errorf("start the forwarder again: %w", err)
	}
	p.in = in
	if err := p.c.waitReady(ctx, in, p.cfg.Levels); err != nil {
		return 0, fmt.Errorf("start the forwarder again: %w", err)
	}
	return time.Since(start), nil
}

// writeCancels writes n cancels to the control topic, as `kdelay cancel`
// does, for ids no record has.
func (p *phase) writeCancels(ctx context.Context, n int) error {
	topic := p.in.Topics().Control()
	bar := startProgress(p.cfg.Progress, "cancels", n, func() (int64, int64) { return p.s.sent.Load(), 0 })
	defer bar.stop()
	p.s.sent.Store(0)
	// Built as kdelay cancel builds one. The ids differ only in their
	// number, so the first says whether the forwarder would take them all.
	rules := kdelay.Rules{Topics: p.in.Topics(), MaxDelay: kdelay.DefaultMaxDelay}
	cancel := func(i int) (*kgo.Record, error) {
		r, _, err := kfleet.CommandRecord(kdelay.CommandCancel, fmt.Sprintf("cancelled-%012d", i), "", "", rules, time.Now())
		return r, err
	}
	if _, err := cancel(0); err != nil {
		return fmt.Errorf("write %d cancels to %s: %w", n, topic, err)
	}
	i := 0
	err := p.s.bulk(ctx, n, func() *kgo.Record {
		i++
		r, _ := cancel(i)
		return r
	})
	if err == nil && p.s.failed.Load() > 0 {
		err = fmt.Errorf("the broker refused %d", p.s.failed.Load())
	}
	if err != nil {
		return fmt.Errorf("write %d cancels to %s: %w", n, topic, err)
	}
	return nil
}
