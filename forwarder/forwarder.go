// Package forwarder moves delayed records through kdelay's topics: from the
// ingress topic into the level that fits, from level to level as heads fall
// due, and to their target topic at their due time — never before it.
//
// Delivery is at-least-once: a record is produced to its next topic, the
// broker acknowledges it, and only then is its offset committed. A crash
// re-delivers at most what was handed on since the last commit.
package forwarder

import (
	"context"
	"fmt"

	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

// Forwarder runs the ingress router and one forwarder per level.
type Forwarder struct {
	cfg   Config
	ready chan struct{}

	mu      sync.Mutex
	workers []*worker
}

// New checks cfg and returns a Forwarder; nothing connects until Run.
func New(cfg Config) (*Forwarder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Forwarder{cfg: cfg, ready: make(chan struct{})}, nil
}

// Ready is closed once kdelay's topics exist and every forwarder has started.
func (f *Forwarder) Ready() <-chan struct{} { return f.ready }

// Run creates missing topics, then forwards until ctx ends. It returns nil
// after a clean shutdown, once every forwarder has committed and left its
// group.
func (f *Forwarder) Run(ctx context.Context) error {
	dlqMax, err := f.prepare(ctx)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range f.cfg.stages() {
		w, err := newWorker(&f.cfg, s.topic, f.cfg.Group+s.group, s.wait, dlqMax)
		if err != nil {
			return fmt.Errorf("start forwarder for %s: %w", s.topic, err)
		}
		f.mu.Lock()
		f.workers = append(f.workers, w)
		f.mu.Unlock()
		g.Go(func() error { return w.run(gctx) })
	}
	f.cfg.Logger.Info("forwarding", "ingress", f.cfg.Topics.Ingress(), "levels", len(f.cfg.Levels), "mode", f.cfg.Mode)
	close(f.ready)
	return g.Wait()
}

// Stats sums what every forwarder did so far.
func (f *Forwarder) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s Stats
	for _, w := range f.workers {
		w.mu.Lock()
		s.add(w.stats)
		w.mu.Unlock()
	}
	return s
}

// prepare creates missing topics and returns the DLQ's max.message.bytes,
// which dead letters are cut to fit; 0 if the broker would not say, and then
// a dead letter is cut when the broker refuses it as too large.
func (f *Forwarder) prepare(ctx context.Context) (dlqMax int, err error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(f.cfg.Brokers...)}, f.cfg.ClientOpts...)...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := ensureTopics(ctx, adm, &f.cfg); err != nil {
		return 0, err
	}
	dlqMax, err = maxMessageBytes(ctx, adm, f.cfg.Topics.DLQ())
	if err != nil {
		f.cfg.Logger.Warn("dlq_limit_unknown", "err", err)
	}
	return dlqMax, nil
}
