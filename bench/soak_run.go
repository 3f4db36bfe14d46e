package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
)

// Groups of a soak's records. Only those due within the run are judged: a
// record due after it ends is still pending, as it should be.
//
// A sweep also leaves out of the lateness the records due within its
// warm-up: they are judged for loss and earliness only.
const (
	GroupDueInRun    = "due in run"
	GroupDueInWarmup = "due in warm-up"
	GroupDueLater    = "due after run"
	soakFloorEvery   = 10              // one floor record for every this many delayed ones
	soakReadTimeout  = 5 * time.Second // what a sample waits for a /metrics
)

// soakRun is one soak: the kdelay serve under test, the broker process
// on the embedded broker, the load written, and what is sampled.
type soakRun struct {
	cfg     *SoakConfig
	machine machineStart
	rep     *SoakReport

	// warmup is how long into the run a record must be due for its
	// lateness to count (GroupDueInWarmup holds those due before, and they
	// get no floor twin): a sweep's. 0, a soak's, counts every record due
	// within the run.
	warmup time.Duration

	c      *cluster
	in     Instance // the kdelay serve under test
	serve  watched
	broker *soakBroker // nil on a cluster
	http   *http.Client
	// serveUsage and brokerUsage are what the processes used over their
	// life, read when close stopped them: the kernel's peak RSS among them.
	serveUsage, brokerUsage Usage

	// The collector keeps a slice header and a flag per record sent, and
	// the sender each floor record and its timer until the end: memory of
	// the benchmark's own process for every record (docs/BENCHMARKS.md,
	// "Soak", says how much), which bounds how long one run can last on a
	// machine, not what it measures.
	coll                    *collector
	stopColl                func()
	s                       *sender
	due, warm, later, floor *lateness // warm only with a warm-up
	dueWin, floorWin        latenessWindow
	started, end            time.Time
}

// start starts the embedded broker if there is no cluster, then the kdelay
// serve under test (or finds the running one), waits until its groups are
// stable, and starts reading its target.
func (r *soakRun) start(ctx context.Context) error {
	cfg := r.cfg
	brokers := cfg.Brokers
	if len(brokers) == 0 {
		run, _ := cfg.Runner.(Command) // validate: no Running without brokers
		b, err := startSoakBroker(run, cfg.Levels, cfg.Partitions)
		if err != nil {
			return err
		}
		r.broker, brokers = b, []string{b.addr}
	}
	c, err := openCluster(brokers, cfg.ClientOpts, cfg.Partitions, cfg.Logger)
	if err != nil {
		return err
	}
	r.c, c.readOpts, c.discard = c, readOpts(cfg.Delivery), r.broker != nil
	r.http = &http.Client{Timeout: soakReadTimeout}
	r.rep = newSoakReport(cfg, c, r.broker != nil)
	if r.broker != nil {
		if err := r.broker.ready(ctx, c); err != nil {
			return err
		}
	}
	name := c.runPrefix + "-soak"
	setup := Setup{
		Brokers: brokers, Topics: kdelay.Topics{Prefix: name}, Group: name, Mode: forwarder.ModeExact,
		Delivery: cfg.Delivery, Levels: cfg.Levels, Partitions: cfg.Partitions, ClientOpts: c.opts, Logger: cfg.Logger,
	}
	if err := r.startServe(ctx, setup); err != nil {
		return err
	}
	if err := c.waitReady(ctx, r.in, cfg.Levels); err != nil {
		return fmt.Errorf("start kdelay serve: %w", err)
	}
	return r.startCollecting(ctx, name+".target")
}

// startServe starts a child kdelay serve with an admin listener on a free
// port, or takes the running one. InProcess, which Soak refuses, runs the
// forwarder in this process: a sweep's tests use it.
func (r *soakRun) startServe(ctx context.Context, setup Setup) error {
	switch run := r.cfg.Runner.(type) {
	case Running:
		in, err := run.Start(ctx, setup)
		r.in, r.serve = in, watched{admin: r.cfg.Admin, pid: run.PID}
		return err
	case InProcess:
		in, err := run.Start(ctx, setup)
		r.in, r.serve = in, watched{pid: os.Getpid()}
		return err
	case Command:
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		ch, err := withServeFlags(run, r.cfg.ServeFlags).start(setup, "--admin", addr)
		if err != nil {
			return err
		}
		r.in, r.serve = ch, watched{admin: addr, pid: ch.cmd.Process.Pid}
		return nil
	}
	return fmt.Errorf("runner %s cannot be soaked", r.cfg.Runner) // validate refuses it first
}

// startCollecting creates the target, starts reading it, and sends a
// record through every ingress partition: the first records pay for
// metadata and connections, which the load should not.
func (r *soakRun) startCollecting(ctx context.Context, target string) error {
	if err := r.c.createTopics(ctx, target); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	coll, err := r.c.collector(cctx, target)
	if err != nil {
		cancel()
		return err
	}
	r.coll, r.stopColl = coll, func() { cancel(); <-coll.done }
	r.s = &sender{cl: r.c.cl, ingress: r.in.Topics().Ingress(), target: target, coll: coll, log: r.cfg.Logger}
	r.due, r.later, r.floor = newLateness(GroupDueInRun), newLateness(GroupDueLater), newLateness(GroupFloor)
	if r.warmup > 0 {
		r.warm = newLateness(GroupDueInWarmup)
	}
	r.dueWin, r.floorWin = latenessWindow{g: r.due}, latenessWindow{g: r.floor}
	warm := &phase{c: r.c, cfg: &Config{Partitions: r.cfg.Partitions}, coll: coll, s: r.s}
	return warm.warmUp(ctx)
}

// run writes the load and calls sample every Interval until Duration has
// passed, then waits up to Grace for the records due within the run.
func (r *soakRun) run(ctx context.Context, sample func(ctx context.Context, at time.Duration)) error {
	r.started = time.Now()
	r.end = r.started.Add(r.cfg.Duration)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return r.write(gctx) })
	g.Go(func() error { return r.sampleAll(gctx, sample) })
	if err := g.Wait(); err != nil {
		return err
	}
	return r.coll.waitFor(ctx, r.end.Add(r.cfg.Grace), func() bool {
		for _, l := range []*lateness{r.due, r.warm, r.floor} {
			if l == nil {
				continue
			}
			if sent, delivered := r.coll.of(l); delivered < sent {
				return false
			}
		}
		return true
	})
}

// write writes Rate records a second to the ingress, each due after a
// delay drawn log-uniformly from MinDelay to MaxDelay, and every
// soakFloorEvery-th one due within the run (after the warm-up, if any) a
// floor twin. It stops at the end of the run even when it could not keep
// up: the records it sent say the rate it reached.
func (r *soakRun) write(ctx context.Context) error {
	delay := logUniform(r.cfg.Seed, r.cfg.MinDelay, r.cfg.MaxDelay)
	// One slice of groups for every record of a kind: the collector keeps
	// it per record, and a slice made per record would be 16 bytes more.
	due, warm, later := []*lateness{r.due}, []*lateness{r.warm}, []*lateness{r.later}
	judgedFrom := r.started.Add(r.warmup)
	for i := 0; ; i++ {
		at := r.started.Add(time.Duration(i) * time.Second / time.Duration(r.cfg.Rate))
		if !at.Before(r.end) || !time.Now().Before(r.end) {
			return nil
		}
		if err := sleepUntil(ctx, at); err != nil {
			return err
		}
		d, ts := delay(), time.Now().Truncate(time.Millisecond)
		gs, judged := later, false
		switch dueAt := ts.Add(d); {
		case dueAt.After(r.end):
		case r.warm != nil && dueAt.Before(judgedFrom):
			gs = warm
		default:
			gs, judged = due, true
		}
		r.s.sent.Add(1)
		r.s.produceOr(ctx, delayedRecord(r.s.ingress, r.s.target, r.coll.expect(gs...), ts, ts.Add(d)), func() {})
		if judged && i%soakFloorEvery == 0 {
			r.s.one(send{delay: d, floor: true, groups: []*lateness{r.floor}})
		}
	}
}

// logUniform returns delays from lo to hi, to the millisecond, whose
// logarithm is uniform: as many from 1s to 10s as from 10s to 100s.
func logUniform(seed uint64, lo, hi time.Duration) func() time.Duration {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	a, b := math.Log(float64(lo)), math.Log(float64(hi))
	return func() time.Duration {
		return time.Duration(math.Exp(a + rng.Float64()*(b-a))).Truncate(time.Millisecond)
	}
}

// sampleAll calls sample every Interval from the start of the load to its
// end, both included, and fails once the kdelay serve has stopped.
func (r *soakRun) sampleAll(ctx context.Context, sample func(ctx context.Context, at time.Duration)) error {
	for k := 0; ; k++ {
		at := r.started.Add(time.Duration(k) * r.cfg.Interval)
		if at.After(r.end) {
			return nil
		}
		if err := sleepUntil(ctx, at); err != nil {
			return err
		}
		if err := r.stopped(); err != nil {
			return fmt.Errorf("%s into the run: %w", at.Sub(r.started).Round(time.Second), err)
		}
		sample(ctx, at.Sub(r.started))
	}
}

// stopped is the exit of the kdelay serve under test or of the broker's,
// if either stopped by itself.
func (r *soakRun) stopped() error {
	if err := r.in.Err(); err != nil {
		return fmt.Errorf("kdelay serve under test stopped: %w", err)
	}
	if r.broker != nil {
		if err := r.broker.proc.Err(); err != nil {
			return fmt.Errorf("the embedded broker's kdelay serve stopped: %w", err)
		}
	}
	return nil
}

// close stops what start started: writing first, then the kdelay serve
// under test so that it delivers what it holds, then the consumer, the
// benchmark's client, and last the broker they all use. It does so once: a
// second call returns nil.
func (r *soakRun) close() error {
	var errs []error
	if r.s != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r.s.stop(ctx)
		cancel()
		r.s = nil
	}
	if r.in != nil {
		u, err := r.in.Stop()
		r.serveUsage, errs = u, append(errs, err)
		r.in = nil
	}
	if r.stopColl != nil {
		r.stopColl()
		r.stopColl = nil
	}
	if r.c != nil {
		r.c.close()
		r.c = nil
	}
	if r.http != nil {
		r.http.CloseIdleConnections()
	}
	if r.broker != nil {
		u, err := r.broker.stop()
		r.brokerUsage, errs = u, append(errs, err)
		r.broker = nil
	}
	return errors.Join(errs...)
}
