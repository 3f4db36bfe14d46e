package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
)

// faultRun is one scenario running: its broker, its kdelay serve
// processes, the records it writes and the consumer that reads them.
type faultRun struct {
	cfg  *FaultConfig
	sc   scenario
	name string // of its topics and groups

	c       *cluster
	fleet   *fleet
	kafka   *localKafka   // broker-restart on --brokers
	nodes   *localCluster // the cluster scenarios'
	faulted []int32       // nodes the fault in progress stops, in order
	dataDir string        // of a kdelay serve's own broker
	groups  []string      // the forwarder's consumer groups

	coll     *collector
	stopColl func()
	s        *sender
	floor    *faultFloor
	first    int // id of the first record written, after the warm-up
	last     int // id after the last
	started  time.Time
	windows  []window
	written  map[int]int32 // copies of each id the ingress holds, read at the end
	res      FaultResult
}

// runScenario runs one scenario within cfg's deadline and reports what it
// measured, with its error if it did not run to its end. Shutdown order:
// writing stops, the consumer stops, kdelay serve stops (so that on a
// real cluster its topics are not deleted under it), then the broker.
func runScenario(ctx context.Context, cfg *FaultConfig, sc scenario, runPrefix string) FaultResult {
	started := time.Now()
	ctx, cancel := context.WithTimeout(ctx, cfg.deadline())
	defer cancel()
	r := &faultRun{cfg: cfg, sc: sc, name: runPrefix + "-" + sc.name, res: FaultResult{Scenario: sc.name, Instances: sc.instances}}
	err := r.run(ctx)
	err = errors.Join(err, r.teardown())
	r.summarise()
	if err != nil {
		r.res.Error = err.Error()
		cfg.Logger.Warn("scenario_failed", "scenario", sc.name, "err", err)
	}
	r.res.Elapsed = time.Since(started)
	return r.res
}

func (r *faultRun) run(ctx context.Context) error {
	if err := r.open(ctx); err != nil {
		return err
	}
	for range r.sc.instances {
		if err := r.fleet.start(); err != nil {
			return err
		}
	}
	if ok, err := r.waitBack(ctx, r.sc.instances, 0, nil); err != nil || !ok {
		return errors.Join(err, fmt.Errorf("%d kdelay serve not ready within %s", r.sc.instances, r.cfg.BackTimeout))
	}
	if err := r.startCollecting(ctx); err != nil {
		return err
	}
	if err := r.startFloor(ctx); err != nil {
		return err
	}
	if r.nodes != nil {
		if err := r.checkReplicas(ctx); err != nil {
			return err
		}
	}
	bar := startProgress(r.cfg.Progress, r.sc.name, r.cfg.records(), r.progress)
	defer bar.stop()
	r.started = time.Now()
	written := make(chan error, 1)
	go func() { written <- r.write(ctx) }()
	faultErr := r.injectAll(ctx)
	err := errors.Join(faultErr, <-written)
	r.last = r.coll.nextID()
	lastDue := r.started.Add(r.cfg.Duration + r.cfg.MaxDelay)
	if werr := r.coll.waitFor(ctx, lastDue.Add(r.cfg.Grace), r.coll.settled); werr != nil {
		return errors.Join(err, fmt.Errorf("wait for the records: %w", werr))
	}
	if werr := r.floor.wait(ctx, lastDue.Add(r.cfg.Grace)); werr != nil {
		return errors.Join(err, fmt.Errorf("wait for the floor's records: %w", werr))
	}
	// Copies delivered again after a restart may come after the last
	// record's first: read on a little.
	err = errors.Join(err, sleepUntil(ctx, time.Now().Add(r.cfg.Settle)))
	copies, cerr := r.ingressCopies(ctx)
	r.written = copies
	return errors.Join(err, cerr)
}

// open connects to the scenario's broker and prepares its kdelay serve
// processes: on the embedded broker, kfake in this process, or for
// broker-restart a kdelay serve with its own broker on a free port.
func (r *faultRun) open(ctx context.Context) error {
	cmd := r.cfg.Runner
	cmd.Args = append(slices.Clone(cmd.args()), r.cfg.ServeFlags...)
	brokers := r.cfg.Brokers
	if r.sc.ownBroker && len(brokers) == 0 {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		if r.dataDir, err = os.MkdirTemp("", "kdelay-faults-"); err != nil {
			return fmt.Errorf("make a data directory for the embedded broker: %w", err)
		}
		cmd.Args = append(cmd.Args, "--listen", addr, "--data-dir", r.dataDir)
		brokers = []string{addr}
	}
	c, err := openCluster(brokers, nil, r.cfg.Partitions, r.cfg.Logger)
	if err != nil {
		return err
	}
	r.c = c
	c.discard = r.dataDir != ""
	c.runPrefix = r.name // so that close deletes the scenario's topics
	r.res.Broker = c.String()
	setup := Setup{
		Brokers: c.brokers, Topics: kdelay.Topics{Prefix: r.name}, Group: r.name, Mode: forwarder.ModeExact,
		Delivery: r.cfg.Delivery, Levels: r.cfg.Levels, Partitions: r.cfg.Partitions, Logger: r.cfg.Logger,
	}
	if r.dataDir != "" {
		setup.Brokers = nil // serve runs its own
		r.res.Broker = "embedded broker of kdelay serve (" + brokers[0] + ")"
	}
	r.fleet = &fleet{cmd: cmd, setup: setup}
	r.groups = forwarderGroups(r.name, r.cfg.Levels)
	switch {
	case r.sc.ownBroker && len(r.cfg.Brokers) > 0:
		r.kafka, err = newLocalKafka(ctx, r.cfg.LocalKafka, r.cfg.Brokers[0])
	case r.sc.cluster:
		r.nodes, err = newLocalCluster(ctx, r.cfg.LocalKafka, c.cl)
	}
	return err
}

// startCollecting creates the target, starts reading it, and warms the
// path up with a record through every ingress partition.
func (r *faultRun) startCollecting(ctx context.Context) error {
	target := r.name + ".target"
	if err := r.c.createTopics(ctx, target); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	coll, err := r.c.collect(cctx, target, true, r.cfg.collectorOpts()...)
	if err != nil {
		cancel()
		return err
	}
	r.coll, r.stopColl = coll, func() { cancel(); <-coll.done }
	r.s = &sender{cl: r.c.cl, ingress: r.fleet.setup.Topics.Ingress(), target: target, coll: coll, log: r.cfg.Logger}
	warm := &phase{c: r.c, cfg: &Config{Partitions: r.cfg.Partitions}, coll: coll, s: r.s}
	if err := warm.warmUp(ctx); err != nil {
		return err
	}
	r.first = coll.nextID()
	return nil
}

// write writes the scenario's records at a steady rate, each with a
// delay uniform from 0 to MaxDelay and a floor twin due when it is, and
// returns once all are handed to the client or ctx ends.
func (r *faultRun) write(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(r.cfg.Seed, r.cfg.Seed^0x9e3779b97f4a7c15))
	for i := range r.cfg.records() {
		if err := sleepUntil(ctx, r.started.Add(time.Duration(i)*time.Second/time.Duration(r.cfg.Rate))); err != nil {
			return fmt.Errorf("write records: %w", err)
		}
		delay := time.Duration(rng.Int64N(int64(r.cfg.MaxDelay) + 1)).Truncate(time.Millisecond)
		ts := time.Now().Truncate(time.Millisecond)
		due := ts.Add(delay)
		id := r.coll.expect()
		r.coll.scheduled(id, due)
		r.s.sent.Add(1)
		r.s.produceOr(ctx, delayedRecord(r.s.ingress, r.s.target, id, ts, due), func() { r.coll.refused(id) })
		r.floor.twin(due)
	}
	return nil
}

// injectAll injects the scenario's faults, FaultAt after writing started
// and Every after each other, and waits after each until the system is
// back.
func (r *faultRun) injectAll(ctx context.Context) error {
	next := r.started.Add(r.cfg.FaultAt)
	end := r.started.Add(r.cfg.Duration)
	for range r.cfg.Faults {
		if next.After(end) || !r.sc.again(r) {
			return nil
		}
		if err := sleepUntil(ctx, next); err != nil {
			return err
		}
		before, _ := r.c.members(ctx, r.groups) // nil: every member counts as new
		at := time.Now()
		r.cfg.Logger.Info("fault", "scenario", r.sc.name, "at", at.Sub(r.started))
		r.faulted = nil
		want, fresh, err := r.sc.inject(ctx, r)
		var ok bool
		if err == nil {
			ok, err = r.waitBack(ctx, want, fresh, before)
		}
		back := time.Now()
		r.res.Faults = append(r.res.Faults, Fault{At: at.Sub(r.started), Back: back.Sub(at), BackOK: ok, Nodes: r.faulted})
		r.windows = append(r.windows, window{at, back})
		if err != nil {
			return fmt.Errorf("fault at %s: %w", at.Sub(r.started).Round(time.Millisecond), err)
		}
		next = later(at.Add(r.cfg.Every), back)
	}
	return nil
}

// waitBack waits until every group of the forwarder is Stable with want
// members, at least fresh of them not in before, and, on a local-kafka
// cluster, every node serves; false after BackTimeout.
// It fails at once when a kdelay serve exits by itself.
func (r *faultRun) waitBack(ctx context.Context, want, fresh int, before map[string][]string) (bool, error) {
	deadline := time.Now().Add(r.cfg.BackTimeout)
	for {
		if err := r.fleet.err(); err != nil {
			return false, err
		}
		missing := r.notBack(ctx, want, fresh, before)
		if missing == "" {
			return true, nil
		}
		if time.Now().After(deadline) {
			r.cfg.Logger.Warn("not_back", "scenario", r.sc.name, "after", r.cfg.BackTimeout, "waiting_for", missing)
			return false, nil
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return false, err
		}
	}
}

// notBack says what the system still lacks to be back; "" once it is.
func (r *faultRun) notBack(ctx context.Context, want, fresh int, before map[string][]string) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if r.nodes != nil {
		if missing := r.notServing(ctx); missing != "" {
			return missing
		}
	}
	now, err := r.c.members(ctx, r.groups)
	if err != nil {
		return "the groups' members: " + err.Error()
	}
	for _, g := range r.groups {
		ids := now[g]
		var added int
		for _, id := range ids {
			if !slices.Contains(before[g], id) {
				added++
			}
		}
		if len(ids) != want || added < fresh {
			return fmt.Sprintf("group %s stable with %d members, %d of them new (now %d stable members, %d new)", g, want, fresh, len(ids), added)
		}
	}
	return ""
}

// progress is what the bar shows: records written and arrived.
func (r *faultRun) progress() (scheduled, delivered int64) {
	_, arrived := r.coll.counts()
	return r.s.sent.Load(), int64(arrived - r.first) // the warm-up's all arrived
}

// teardown stops everything the scenario started, each step bounded.
func (r *faultRun) teardown() error {
	var errs []error
	if r.s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r.s.stop(ctx)
		cancel()
	}
	if r.floor != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r.floor.stop(ctx)
		cancel()
	}
	if r.stopColl != nil {
		r.stopColl()
	}
	if r.fleet != nil {
		errs = append(errs, r.fleet.stop())
	}
	if r.c != nil {
		r.c.close()
	}
	if r.dataDir != "" {
		errs = append(errs, os.RemoveAll(r.dataDir))
	}
	return errors.Join(errs...)
}

// summarise counts the scenario's records from the collector's trace, and
// the floor's twins from the floor's.
func (r *faultRun) summarise() {
	if r.coll == nil || r.last <= r.first {
		return
	}
	ts := r.coll.traced(r.first, r.last)
	for i, t := range ts {
		if n := r.written[r.first+i]; n > 1 {
			r.res.WrittenTwice++
		}
		if t.copies > max(1, r.written[r.first+i]) {
			r.res.AddedIDs++
		}
		if t.refused && t.copies == 0 {
			r.res.SendFailed++
		}
		if t.copies > 1 {
			r.res.DuplicateIDs++
			r.res.ExtraCopies += int64(t.copies - 1)
		}
	}
	r.res.All, r.res.DuringFaults = r.lateness(ts)
	r.res.MaxDueAt = r.maxDueAt(ts)
	r.res.Records = recordTraces("kdelay", r.started, ts)
	a := r.res.All
	r.res.Sent, r.res.Delivered, r.res.Lost, r.res.Early, r.res.MostEarly = a.Sent, a.Delivered, a.Lost, a.Early, a.MostEarly
	if r.floor != nil && r.floor.coll != nil {
		floor := r.floor.traced()
		r.res.Floor, r.res.FloorDuringFaults = r.lateness(floor)
		r.res.FloorMaxDueAt = r.maxDueAt(floor)
		r.res.Records = append(r.res.Records, recordTraces("floor", r.started, floor)...)
		r.res.MaxOverFloor = r.res.All.Max - r.res.Floor.Max
		r.res.DuringFaultsMaxOverFloor = r.res.DuringFaults.Max - r.res.FloorDuringFaults.Max
	}
}

// maxDueAt is when the latest record of ts that arrived within the grace
// was due, after writing started.
func (r *faultRun) maxDueAt(ts []traced) time.Duration {
	var most, at time.Duration
	for _, t := range ts {
		if late := t.first.Sub(t.due); t.copies > 0 && late <= r.cfg.Grace && late >= most {
			most, at = late, t.due.Sub(r.started)
		}
	}
	return at
}

// lateness is how late the records of ts arrived: all of them, and those
// due while a fault lasted. A record the broker refused and that never
// arrived counts in neither; one whose first copy came more than Grace
// after its due time is lost; copies after the first are duplicates.
func (r *faultRun) lateness(ts []traced) (all, duringFaults Group) {
	a, during := newLateness("all"), newLateness("during faults")
	for _, t := range ts {
		if t.refused && t.copies == 0 {
			continue
		}
		gs := []*lateness{a}
		if slices.ContainsFunc(r.windows, func(w window) bool { return w.holds(t.due) }) {
			gs = append(gs, during)
		}
		for _, g := range gs {
			g.sent++
			if t.copies > 0 && t.first.Sub(t.due) <= r.cfg.Grace {
				g.record(t.first.Sub(t.due), t.due, t.first)
				g.dups += int64(t.copies - 1)
			}
		}
	}
	return a.summary(), during.summary()
}
