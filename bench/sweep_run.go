package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sweepRate runs one rate of a sweep, as a soak of cfg.For on a fresh
// kdelay serve (and a fresh embedded broker), its processes read from
// /proc every Interval, and returns its row.
func sweepRate(ctx context.Context, cfg *SweepConfig, rate int) SweepRow {
	sc := cfg.soak(rate)
	r := &soakRun{cfg: &sc, warmup: cfg.Warmup}
	var serve, broker *procWatch
	err := r.start(ctx)
	if err == nil {
		serve = &procWatch{pid: r.serve.pid, from: cfg.Warmup}
		if r.broker != nil {
			broker = &procWatch{pid: r.broker.watched.pid, from: cfg.Warmup}
		}
		err = r.run(ctx, func(_ context.Context, at time.Duration) {
			serve.read(at)
			broker.read(at)
		})
	}
	s := r.s
	err = errors.Join(err, r.close()) // the groups are read once the consumer has stopped
	row := SweepRow{
		Rate: rate, Judged: summaryOf(r.due), Warmup: summaryOf(r.warm), Later: summaryOf(r.later), Floor: summaryOf(r.floor),
		Serve: serve.figures(r.serveUsage),
	}
	row.Serve.Shared = r.serveUsage.Shared
	if broker != nil {
		b := broker.figures(r.brokerUsage)
		row.Broker = &b
	}
	if s != nil {
		row.SendFailed = s.failed.Load()
	}
	if err != nil {
		row.Error = err.Error()
	}
	row.derive(cfg.For)
	return row
}

// soak is the SoakConfig of one rate's run.
func (c *SweepConfig) soak(rate int) SoakConfig {
	return SoakConfig{
		Brokers: c.Brokers, Runner: c.Runner, Rate: rate, MinDelay: c.MinDelay, MaxDelay: c.MaxDelay,
		Duration: c.For, Interval: c.Interval, Warmup: c.Warmup, Levels: c.Levels, Partitions: c.Partitions,
		Delivery: c.Delivery, Grace: c.Grace, ServeFlags: c.ServeFlags, Seed: c.Seed, ClientOpts: c.ClientOpts,
		Logger: c.Logger,
	}
}

// summaryOf is l's summary; a group a run that did not start lacks is
// empty.
func summaryOf(l *lateness) Group {
	if l == nil {
		return Group{}
	}
	return l.summary()
}

// maxRate is kdelay's forwarding rate over cfg.MaxRecords records all due
// at once, measured as `kdelay bench --copy` measures it (kdelayCopy): on
// a fresh embedded broker, a kdelay serve of its own, or on cfg.Brokers,
// with a kdelay serve with cfg.ServeFlags.
func maxRate(ctx context.Context, cfg *SweepConfig) (rate float64, err error) {
	brokers := cfg.Brokers
	var b *soakBroker
	if len(brokers) == 0 {
		run, _ := cfg.Runner.(Command)
		if b, err = startSoakBroker(run, cfg.Levels, cfg.Partitions); err != nil {
			return 0, err
		}
		defer func() {
			_, stopErr := b.stop()
			err = errors.Join(err, stopErr)
		}()
		brokers = []string{b.addr}
	}
	c, err := openCluster(brokers, cfg.ClientOpts, cfg.Partitions, cfg.Logger)
	if err != nil {
		return 0, err
	}
	defer c.close() // before the broker stops: it deletes the run's topics from a cluster
	c.readOpts, c.discard = readOpts(cfg.Delivery), b != nil
	if b != nil {
		if err := b.ready(ctx, c); err != nil {
			return 0, err
		}
	}
	runner := cfg.Runner
	if run, ok := runner.(Command); ok {
		runner = withServeFlags(run, cfg.ServeFlags)
	}
	bc := &Config{Runner: runner, Delivery: cfg.Delivery, Levels: cfg.Levels, Partitions: cfg.Partitions, Logger: cfg.Logger}
	rate, err = kdelayCopy(ctx, c, bc, c.runPrefix+"-max", cfg.MaxRecords)
	if err == nil && rate == 0 {
		err = fmt.Errorf("the %d records arrived in one fetch, too few to time: raise max-records", cfg.MaxRecords)
	}
	return rate, err
}
