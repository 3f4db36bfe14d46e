// Package forwarder moves delayed records through kdelay's topics: from the
// ingress topic into the level that fits, from level to level as heads fall
// due, and to their target topic at their due time — never before it.
//
// Delivery is at-least-once by default: a record is produced to its next
// topic, the broker acknowledges it, and only then is its offset committed. A
// crash re-delivers at most what was handed on since the last commit.
// ExactlyOnce commits both in one Kafka transaction instead (txn.go).
package forwarder

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/sync/errgroup"
)

// Forwarder runs the ingress router and one forwarder per level.
type Forwarder struct {
	cfg    Config
	ready  chan struct{}
	dlqMax int // the DLQ's max.message.bytes; 0 when unknown
	mem    *memoryReleaser
	pool   *bufferPool // what the forwarders borrow beyond their reserves

	cmds   *commands // read from the control topic; consulted by every worker
	owners *owners   // the partitions every worker owns
	beats  *quickBeats

	waiting atomic.Pointer[string] // why it has not started its stages yet, while it waits by design

	mu      sync.Mutex
	workers []*worker
}

// New checks cfg and returns a Forwarder; nothing connects until Run.
func New(cfg Config) (*Forwarder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Forwarder{cfg: cfg, ready: make(chan struct{})}
	f.mem = newMemoryReleaser(&f.cfg)
	f.owners = newOwners()
	f.beats = newQuickBeats()
	f.pool = newBufferPool(&f.cfg)
	return f, nil
}

// Ready is closed once kdelay's topics exist and every forwarder has started.
func (f *Forwarder) Ready() <-chan struct{} { return f.ready }

// Waiting says why the Forwarder has not started its forwarders yet while it
// waits by design, "" when it does not: an upgrade from the per-stage layout
// waits until no process of that layout runs (upgrade.go). The process is
// well meanwhile; a rolling deploy that waited for it to be ready would
// wait forever for the old processes it has yet to stop.
func (f *Forwarder) Waiting() string {
	if why := f.waiting.Load(); why != nil {
		return *why
	}
	return ""
}

// Run creates missing topics, then forwards until ctx ends. It returns nil
// after a clean shutdown, once every forwarder has committed and left its
// group (see leaveGroups).
//
// Besides the ingress and the configured levels, it drains every level topic
// of its prefix that is no longer configured but still holds records (see
// findDropped); each such forwarder stops on its own once its level is empty.
func (f *Forwarder) Run(ctx context.Context) error {
	cl := f.cfg.Client
	if cl == nil {
		var err error
		if cl, err = NewPlainClient(f.cfg); err != nil {
			return err
		}
		// Closed after g.Wait: the drain watchers use it until they return.
		defer cl.Close()
	}
	adm := kadm.NewClient(cl)
	if err := ensureTopics(ctx, adm, &f.cfg); err != nil {
		return err
	}
	for _, r := range f.cfg.Readers {
		if err := r.Prepare(ctx, adm); err != nil {
			return err
		}
	}
	f.dlqMax = f.dlqLimit(ctx, adm)
	drains, err := findDropped(ctx, adm, &f.cfg)
	if err != nil {
		// Forwarding the configured levels matters more than draining old
		// ones; the next start looks again.
		f.cfg.Logger.Warn("dropped_levels_not_checked", "err", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return f.mem.run(gctx) })
	g.Go(func() error { return f.beats.run(gctx) })
	if err := f.readCommands(gctx, g, cl); err != nil {
		cancel()
		return errors.Join(err, g.Wait())
	}
	closeShared, err := f.startStages(gctx, g, adm, drains)
	if err != nil {
		stopped := ctx.Err() != nil // told to stop while it waited (upgrade.go): a clean stop
		cancel()
		if stopped && errors.Is(err, context.Canceled) {
			return g.Wait()
		}
		return errors.Join(err, g.Wait())
	}
	f.cfg.Logger.Info("forwarding", "ingress", f.cfg.Topics.Ingress(), "levels", len(f.cfg.Levels), "draining", len(drains), "mode", f.cfg.Mode, "delivery", f.cfg.Delivery, "groups", len(f.groups()))
	close(f.ready)
	g.Go(func() error { f.notify(gctx, cl, noticeJoined); return nil })
	err = g.Wait()
	if closeShared != nil {
		// After every stage's shutdown, which commits through it.
		closeShared()
	}
	if err != nil {
		// Not after a failure: a fenced forwarder's instance id belongs to
		// the process that fenced it, which leaving would remove.
		return err
	}
	// Only after a leave: a process that could not reach the group would
	// wait for the notice too, past its shutdown timeout.
	if f.leaveGroups(adm, f.groups()) {
		f.notify(context.Background(), cl, noticeLeft)
	}
	return nil
}

// startStages starts a worker for the ingress, each level and each dropped
// level in g, on one shared client (client_shared.go). closeShared closes
// that client; nil when there is none, or when g closes it.
func (f *Forwarder) startStages(ctx context.Context, g *errgroup.Group, adm *kadm.Client, drains []dropped) (closeShared func(), err error) {
	return f.runShared(ctx, g, adm, drains)
}

// groups are the consumer groups of every forwarder started, each once.
func (f *Forwarder) groups() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var groups []string
	for _, w := range f.workers {
		if !slices.Contains(groups, w.group) {
			groups = append(groups, w.group)
		}
	}
	return groups
}

// adopt counts w among the Forwarder's workers, in place of old if not nil:
// it keeps old's counts, which the metrics must never see go back.
func (f *Forwarder) adopt(w, old *worker) {
	w.cmds = f.cmds
	w.mem = f.mem
	w.buf.pool = f.pool
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.Index(f.workers, old); old != nil && i >= 0 {
		old.mu.Lock()
		w.stats = old.stats
		old.mu.Unlock()
		f.workers[i] = w
		return
	}
	f.workers = append(f.workers, w)
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

// dlqLimit returns the DLQ's max.message.bytes, which dead letters are cut
// to fit; 0 if the broker would not say, and then a dead letter is cut when
// the broker refuses it as too large.
func (f *Forwarder) dlqLimit(ctx context.Context, adm *kadm.Client) int {
	dlqMax, err := maxMessageBytes(ctx, adm, f.cfg.Topics.DLQ())
	if err != nil {
		f.cfg.Logger.Warn("dlq_limit_unknown", "err", err)
	}
	return dlqMax
}
