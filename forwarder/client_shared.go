package forwarder

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay/stages"
)

// In at-least-once delivery every stage of a process (the ingress, each
// level, each dropped level being drained) is read by one client, in one
// consumer group: Config.Group. One client keeps about five connections a
// broker where one a stage kept some 55, and a fleet is one group, which a
// deploy rebalances once, not once a stage (docs/design/one-client.md).
// Each stage keeps its worker, with its partitions, buffer and commits;
// the client's poll loop hands each worker the records of its topic, and
// the group's callbacks each worker its partitions (client_group.go).
//
// Exactly-once keeps a client and group a stage: franz-go commits a
// transaction's offsets for its own consumer's group only, and one
// transaction across every stage is a step still to come.

// runShared starts the workers of stages on one client in g, and its poll
// loop. It first takes over the committed offsets of the per-stage layout's
// groups (upgrade.go), which waits while a process of that layout runs.
// close closes the client once g is done; nil when nothing was started.
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

	byTopic := map[string]*worker{}
	workers := make([]*worker, len(all))
	for i, s := range all {
		workers[i] = makeWorker(&f.cfg, s, f.owners)
		byTopic[s.topic] = workers[i]
	}
	opts := append(clientOpts(&f.cfg, f.cfg.Group, topics...), stageCallbacks(byTopic)...)
	opts = append(opts, f.cfg.ClientOpts...)
	opts = append(opts, sharedClientOpts(f.cfg.Observer)...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("start the forwarders' client: %w", err)
	}
	gate, hold := &pollGate{}, newPollHold(holdMax(&f.cfg))
	for _, w := range workers {
		w.cl = newStageClient(cl, w.source, gate, false)
		w.cl.hold = hold
		w.dlqMax = dlqLimit(cl, &f.cfg, f.dlqMax)
		f.adopt(w)
	}
	poll := newPollLoop(workers[0].cl, f.cfg.Logger, byTopic)
	g.Go(func() error { return poll.run(ctx) })
	for i, w := range workers {
		wctx := ctx
		if i >= len(all)-len(drains) {
			d := drains[i-(len(all)-len(drains))]
			var stop context.CancelFunc
			wctx, stop = context.WithCancel(ctx)
			f.logDraining(d)
			g.Go(func() error { return watchDrain(ctx, adm, &f.cfg, d, stop) })
		}
		g.Go(func() error { return w.run(wctx) })
	}
	return cl.CloseAllowingRebalance, nil
}

// takeOverStages gives each stage's group of exactly-once the offsets that
// at-least-once committed in the one group, where they are further on: after
// a switch from at-least-once, each stage goes on where the one group left
// it rather than where it was before. It waits while a process of
// at-least-once runs (upgrade.go).
func (f *Forwarder) takeOverStages(ctx context.Context, adm *kadm.Client, drains []dropped) error {
	all := f.cfg.stages()
	for _, d := range drains {
		all = append(all, d.stage)
	}
	for _, s := range all {
		up := upgrade{to: f.cfg.Group + s.group, from: []string{f.cfg.Group}, topics: []string{s.topic}, brokers: f.cfg.Brokers,
			log: f.cfg.Logger, waiting: f.wait}
		err := takeOver(ctx, adm, up)
		f.waiting.Store(nil)
		if err != nil {
			return err
		}
	}
	return nil
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
