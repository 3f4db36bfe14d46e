package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
)

// phase is one forwarder under test, the target it delivers to, the
// consumer that measures it, and the groups it fills.
type phase struct {
	c    *cluster
	cfg  *Config
	in   Instance
	coll *collector
	s    *sender
	gs   groups
}

// measureMode runs the steady workload, then the burst, through a forwarder
// in mode with topics and groups of its own. Shutdown order: the forwarder
// stops first, so that the consumer sees everything it delivered, then the
// consumer.
func measureMode(ctx context.Context, c *cluster, cfg *Config, mode forwarder.Mode) (ModeResult, error) {
	started := time.Now()
	name := c.runPrefix + "-" + string(mode)
	p, stop, err := startPhase(ctx, c, cfg, name, mode)
	if err != nil {
		return ModeResult{}, err
	}
	err = p.measure(ctx, string(mode))
	usage, stopErr := stop()
	if err = errors.Join(err, stopErr); err != nil {
		return ModeResult{}, fmt.Errorf("mode %s: %w", mode, err)
	}
	return ModeResult{
		Mode: mode, Groups: p.summaries(), SendFailed: p.s.failed.Load(), Usage: usage, Elapsed: time.Since(started),
	}, nil
}

// startPhase creates the target topic, starts consuming it, starts the
// forwarder and waits until it is ready. stop stops the forwarder, then the
// consumer.
func startPhase(ctx context.Context, c *cluster, cfg *Config, name string, mode forwarder.Mode) (*phase, func() (Usage, error), error) {
	target := name + ".target"
	if err := c.createTopics(ctx, target); err != nil {
		return nil, nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	coll, err := c.collector(cctx, target)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	stopCollector := func() { cancel(); <-coll.done }
	in, err := cfg.Runner.Start(ctx, c.forwarderSetup(cfg, name, mode))
	if err == nil {
		err = c.waitReady(ctx, in, cfg.Levels)
	}
	if err != nil {
		if in != nil {
			_, _ = in.Stop()
		}
		stopCollector()
		return nil, nil, fmt.Errorf("start the forwarder in mode %s: %w", mode, err)
	}
	s := &sender{cl: c.cl, ingress: in.Topics().Ingress(), target: target, coll: coll, log: cfg.Logger}
	p := &phase{c: c, cfg: cfg, in: in, coll: coll, s: s, gs: groups{}}
	// p.in, not in: a phase may restart its forwarder (live_commands.go).
	stop := func() (Usage, error) {
		s.stop(context.WithoutCancel(ctx))
		u, err := p.in.Stop()
		stopCollector()
		return u, err
	}
	return p, stop, nil
}

func (c *cluster) forwarderSetup(cfg *Config, name string, mode forwarder.Mode) Setup {
	return Setup{
		Brokers: c.brokers, Topics: kdelay.Topics{Prefix: name}, Group: name, Mode: mode, Delivery: cfg.Delivery, Levels: cfg.Levels,
		Partitions: cfg.Partitions, ClientOpts: c.opts, Logger: cfg.Logger,
	}
}

// measure warms the forwarder up, then sends the steady workload and waits
// for it, then the burst.
func (p *phase) measure(ctx context.Context, title string) error {
	if err := p.warmUp(ctx); err != nil {
		return err
	}
	sends := plan(p.cfg.Workload, p.cfg.Levels, p.cfg.Seed, p.gs)
	_, warm := p.coll.counts()
	bar := startProgress(p.cfg.Progress, title, len(sends)+p.cfg.Workload.Burst, func() (int64, int64) {
		_, arrived := p.coll.counts()
		return p.s.sent.Load(), int64(arrived - warm)
	})
	defer bar.stop()
	if err := p.steady(ctx, sends); err != nil {
		return err
	}
	return p.sendBurst(ctx)
}

// warmUp sends a record due now through every ingress partition, and one
// straight to the target, and waits for them: the first records pay for
// metadata, connections and fetch sessions, which later ones do not.
func (p *phase) warmUp(ctx context.Context) error {
	g := newLateness("warm-up")
	now := time.Now().Truncate(time.Millisecond)
	for range p.cfg.Partitions {
		p.s.produce(delayedRecord(p.s.ingress, p.s.target, p.coll.expect(g), now, now))
	}
	p.s.produce(targetRecord(p.s.target, p.coll.expect(g), now))
	if err := p.coll.wait(ctx, time.Now().Add(30*time.Second)); err != nil {
		return err
	}
	if sent, delivered := p.coll.of(g); delivered < sent {
		return fmt.Errorf("%d of %d warm-up records arrived at %s within 30s: is the forwarder running on %s?",
			delivered, sent, p.s.target, p.s.ingress)
	}
	return nil
}

// steady sends the planned records and waits until each arrived or is
// lost: not arrived Grace after the last one was due.
func (p *phase) steady(ctx context.Context, sends []send) error {
	if len(sends) == 0 {
		return nil
	}
	start := time.Now()
	var last time.Duration
	for _, sd := range sends {
		last = max(last, sd.at+sd.delay)
	}
	if err := p.s.steady(ctx, sends); err != nil {
		return err
	}
	return p.coll.wait(ctx, start.Add(last+p.cfg.Grace))
}

// sendBurst sends the burst and waits for it.
func (p *phase) sendBurst(ctx context.Context) error {
	w := p.cfg.Workload
	if w.Burst == 0 {
		return nil
	}
	g := p.gs.get(GroupBurst)
	due, written, err := p.s.burst(ctx, w.Burst, w.BurstLead, g)
	if err != nil {
		return fmt.Errorf("send the burst: %w", err)
	}
	if written.After(due) {
		p.cfg.Logger.Warn("burst_written_after_due", "late_by", written.Sub(due), "hint", "raise the burst lead")
	}
	return p.coll.wait(ctx, due.Add(p.cfg.Grace))
}

// summaries are the phase's groups, the burst with its throughput.
func (p *phase) summaries() []Group {
	out := p.gs.summaries()
	for i, g := range out {
		if g.Name == GroupBurst {
			b := p.gs[GroupBurst]
			out[i].PerSecond = b.throughput(b.due)
		}
	}
	return out
}
