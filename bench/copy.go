package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
)

// forwardFunc starts moving every record of source to target, until stop.
type forwardFunc func(ctx context.Context, source, target string) (stop func() error, err error)

// compareCopy moves cfg.Workload.Copy records that are all due from one
// topic to another, with a raw franz-go consume→produce copy and with
// kdelay, CopyRuns times each, taking turns so that both see the same
// machine. Each starts once its source is full, so it runs at full speed,
// and is timed from the first record reaching the target to the last. The
// result is the median of each.
func compareCopy(ctx context.Context, c *cluster, cfg *Config) (*CopyResult, error) {
	n, runs := cfg.Workload.Copy, max(cfg.Workload.CopyRuns, 1)
	res := &CopyResult{Records: n}
	for i := range runs {
		name := fmt.Sprintf("%s-copy%d", c.runPrefix, i)
		raw, err := throughput(ctx, c, name+".source", name+".target", n, c.rawCopy)
		if err != nil {
			return nil, fmt.Errorf("raw copy: %w", err)
		}
		kd, err := kdelayCopy(ctx, c, cfg, fmt.Sprintf("%s-throughput%d", c.runPrefix, i), n)
		if err != nil {
			return nil, fmt.Errorf("kdelay: %w", err)
		}
		res.CopyRuns, res.KdelayRuns = append(res.CopyRuns, raw), append(res.KdelayRuns, kd)
	}
	res.Copy, res.Kdelay = median(res.CopyRuns), median(res.KdelayRuns)
	res.Ratio = ratioOrZero(res.Kdelay, res.Copy)
	return res, nil
}

// kdelayCopy times a forwarder started on an ingress already full of due
// records.
func kdelayCopy(ctx context.Context, c *cluster, cfg *Config, name string, n int) (float64, error) {
	ingress := kdelay.Topics{Prefix: name}.Ingress()
	return throughput(ctx, c, ingress, name+".target", n, func(ctx context.Context, _, _ string) (func() error, error) {
		in, err := cfg.Runner.Start(ctx, c.forwarderSetup(cfg, name, forwarder.ModeExact))
		if err != nil {
			return nil, err
		}
		return func() error { _, err := in.Stop(); return err }, nil
	})
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// throughput fills source with n records already due, runs forward until
// they all reached target, and returns records per second from the first
// arrival to the last.
func throughput(ctx context.Context, c *cluster, source, target string, n int, forward forwardFunc) (float64, error) {
	if err := c.createTopics(ctx, source, target); err != nil {
		return 0, err
	}
	cctx, cancel := context.WithCancel(ctx)
	coll, err := c.collector(cctx, target)
	if err != nil {
		cancel()
		return 0, err
	}
	stopCollector := sync.OnceFunc(func() { cancel(); <-coll.done })
	defer stopCollector()
	g := newLateness(target)
	s := &sender{cl: c.cl, ingress: source, target: target, coll: coll, log: c.log}
	if _, _, err := s.burst(ctx, n, 0, g); err != nil {
		return 0, fmt.Errorf("fill %s: %w", source, err)
	}
	stop, err := forward(ctx, source, target)
	if err != nil {
		return 0, err
	}
	err = errors.Join(coll.wait(ctx, time.Now().Add(5*time.Minute)), stop())
	if _, delivered := coll.of(g); err == nil && delivered < int64(n) {
		err = fmt.Errorf("%d of %d records reached %s within 5 minutes", delivered, n, target)
	}
	if err != nil {
		return 0, err
	}
	stopCollector() // g is the collector's until it stops
	return g.throughput(g.first), nil
}

// rawCopy is the baseline: one franz-go client that reads source from its
// start and produces each record to target, with the forwarder's producer
// settings, as fast as it goes. It commits nothing and checks nothing.
func (c *cluster) rawCopy(ctx context.Context, source, target string) (func() error, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.brokers...),
		kgo.ConsumeTopics(source),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ProducerLinger(0),
	}, c.opts...)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				cl.Produce(ctx, &kgo.Record{Topic: target, Key: r.Key, Value: r.Value, Headers: r.Headers}, nil)
			})
		}
	}()
	return func() error {
		cancel()
		<-done
		cl.Close()
		return nil
	}, nil
}
