package forwarder

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay/stages"
)

// Every stage of a process (the ingress, each level, each dropped level
// being drained) is read by one client, in one consumer group: Config.Group.
// One client keeps about five connections a broker where one a stage kept
// some 55, and a fleet is one group, which a deploy rebalances once, not
// once a stage (docs/design/one-client.md). Each stage keeps its worker,
// with its partitions, buffer and commits; the client's poll loop hands each
// worker the records of its topic, and the group's callbacks each worker its
// partitions (client_group.go). Exactly-once, the client is one
// transactional producer too, and every stage produces into its one
// transaction (txn_loop.go).

// shared is the stages of a process on their one client.
type shared struct {
	all     []stage
	drains  []dropped // the stages of the last len(drains) workers
	cl      *kgo.Client
	txn     *txnLoop // exactly-once; nil at-least-once
	workers []*worker
	poll    *pollLoop
	wait    *fetchWait
}

// runShared starts the workers of every stage on one client in g, and its
// poll loop. It first takes over the committed offsets of the per-stage
// layout's groups (upgrade.go), which waits while a process of that layout
// runs. close closes the client once g is done; nil when the client is
// closed in g (exactly-once, whose stages start again on a new client when
// their producer session cannot go on: runRenewing).
func (f *Forwarder) runShared(ctx context.Context, g *errgroup.Group, adm *kadm.Client, drains []dropped) (closeClient func(), err error) {
	all := f.cfg.stages()
	droppedViews := make([]stages.Stage, 0, len(drains))
	for _, d := range drains {
		all = append(all, d.stage)
		droppedViews = append(droppedViews, d.view)
	}
	var topics []string
	for _, s := range all {
		topics = append(topics, s.topic)
	}
	up := upgrade{to: f.cfg.Group, from: f.cfg.view().LegacyGroups(droppedViews), topics: topics, brokers: f.cfg.Brokers,
		log: f.cfg.Logger, waiting: f.wait}
	err = takeOver(ctx, adm, up)
	f.waiting.Store(nil)
	if err != nil {
		return nil, err
	}
	s, err := f.newShared(all, drains, nil)
	if err != nil {
		return nil, err
	}
	if s.txn == nil {
		s.start(ctx, g, f, adm)
		return s.close, nil
	}
	g.Go(func() error { return f.runRenewing(ctx, adm, s) })
	return nil, nil
}

// newShared makes the client and the workers of stages all, the last of
// them the dropped levels drains. When old is not nil, the workers take the
// place of old's and keep their counts (adopt).
func (f *Forwarder) newShared(all []stage, drains []dropped, old *shared) (*shared, error) {
	s := &shared{all: all, drains: drains}
	byTopic := map[string]*worker{}
	var topics []string
	for _, st := range all {
		w := makeWorker(&f.cfg, st, f.owners)
		s.workers = append(s.workers, w)
		byTopic[st.topic] = w
		topics = append(topics, st.topic)
	}
	readers := readersByTopic(f.cfg.Readers)
	for topic := range readers {
		topics = append(topics, topic)
	}
	taken := new(atomic.Uint64)
	gate, hold, wait := &pollGate{}, newPollHold(holdMax(&f.cfg)), newFetchWait(&f.cfg)
	opts := append(clientOpts(&f.cfg, f.cfg.Group, topics...), stageCallbacks(byTopic, readers, taken, wait, f.beats)...)
	opts = append(opts, f.cfg.ClientOpts...)
	opts = append(opts, sharedClientOpts(f.cfg.Observer)...)
	opts = append(opts, kgo.WithHooks(fetchHook{wait}))
	if f.cfg.Delivery == ExactlyOnce {
		opts = append(opts, kgo.OnOffsetsFetched(func(_ context.Context, _ *kgo.Client, resp *kmsg.OffsetFetchResponse) error {
			for _, w := range s.workers {
				w.offsetsFetched(resp)
			}
			return nil
		}))
		sess, err := kgo.NewGroupTransactSession(append(opts, txnOpts(&f.cfg)...)...)
		if err != nil {
			return nil, fmt.Errorf("start the forwarders' client: %w", err)
		}
		s.cl, s.txn = sess.Client(), newTxnLoop(&f.cfg, sess, gate, s.workers, taken)
	} else {
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, fmt.Errorf("start the forwarders' client: %w", err)
		}
		s.cl = cl
	}
	for i, w := range s.workers {
		w.cl = newStageClient(s.cl, w.source, gate, false, w.landed)
		w.cl.hold, w.cl.wait = hold, wait
		w.txn = s.txn
		w.dlqMax = dlqLimit(s.cl, &f.cfg, f.dlqMax)
		var prev *worker
		if old != nil {
			prev = old.workers[i]
		}
		f.adopt(w, prev)
	}
	s.wait = wait
	wait.start(s.cl)
	f.beats.use(s.cl)
	s.poll = newPollLoop(s.workers[0].cl, f.cfg.Logger, byTopic, readers, pollBurst(s.cl))
	for _, r := range f.cfg.Readers {
		c := newReaderClient(r.Topic(), s.cl, gate, s.txn, wait)
		if s.txn != nil {
			s.txn.readers = append(s.txn.readers, c)
		}
		r.Start(c)
	}
	return s, nil
}

// start runs the poll loop and every worker in g, and for each dropped
// level a watch that stops its worker once the level is drained.
func (s *shared) start(ctx context.Context, g *errgroup.Group, f *Forwarder, adm *kadm.Client) {
	g.Go(func() error { return s.poll.run(ctx) })
	first := len(s.workers) - len(s.drains)
	for i, w := range s.workers {
		wctx := ctx
		if i >= first {
			d := s.drains[i-first]
			var stop context.CancelFunc
			wctx, stop = context.WithCancel(ctx)
			f.logDraining(d)
			g.Go(func() error { return watchDrain(ctx, adm, &f.cfg, d, stop) })
		}
		g.Go(func() error { return w.run(wctx) })
	}
}

// runRenewing runs exactly-once stages until ctx ends. Stages that stop
// with errRenew start again, on a new client with a new producer session,
// after a pause that doubles while they keep stopping so (txn_renew.go).
func (f *Forwarder) runRenewing(ctx context.Context, adm *kadm.Client, s *shared) error {
	for backoff := retryBackoffMin; ; backoff = min(2*backoff, retryBackoffMax) {
		started := time.Now()
		err := s.runTxn(ctx, f, adm)
		switch {
		case !errors.Is(err, errRenew):
			return err
		case ctx.Err() != nil:
			return nil // stopping anyway
		}
		if time.Since(started) > retryBackoffMax {
			backoff = retryBackoffMin
		}
		f.cfg.Logger.Warn("transaction_session_renewed", "in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		if s, err = f.newShared(s.all, s.drains, s); err != nil {
			return err
		}
	}
}

// runTxn begins the first transaction, runs the stages and the transaction
// loop until ctx ends or one of them fails, ends the last transaction after
// a clean stop, and closes the client.
func (s *shared) runTxn(ctx context.Context, f *Forwarder, adm *kadm.Client) error {
	// Before the poll loop starts: Begin must not run beside a poll.
	if err := s.txn.begin(ctx); err != nil {
		s.wait.stop()
		s.cl.Close()
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	s.start(gctx, g, f, adm)
	g.Go(func() error { return s.txn.run(gctx) })
	err := g.Wait()
	if err == nil {
		s.txn.last()
	}
	s.close()
	return err
}

// close closes the client, and stops changing its fetches' wait.
func (s *shared) close() {
	s.wait.stop()
	s.cl.CloseAllowingRebalance()
}

// wait notes why the Forwarder waits before starting its stages (Waiting).
func (f *Forwarder) wait(why string) { f.waiting.Store(&why) }

// sharedClientOpts are the hooks an Observer gives a client that serves
// every level, when it has any (ClientObserver).
func sharedClientOpts(o Observer) []kgo.Opt {
	if co, ok := o.(ClientObserver); ok {
		return co.ClientOpts()
	}
	return nil
}
