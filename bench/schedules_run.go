package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/schedule"
)

// schedulesMetric is the schedules in force in kdelay serve's /metrics,
// indexMetric what its scheduler holds for them.
const (
	schedulesMetric = "kdelay_schedules"
	indexMetric     = "kdelay_schedule_index_bytes"
)

// schedulesRun is one run of Schedules: a soak's kdelay serve, broker and
// reader of the target, without a soak's load.
type schedulesRun struct {
	cfg  *SchedulesConfig
	soak *soakRun

	sched     *schedule.Scheduler // InProcess only: serve runs its own
	stopSched func() error
	watch     *procWatch
	stopWatch func()
	occ, warm *lateness
}

// run starts serve, reads its memory empty, writes the schedules, waits
// until serve has them all in force, reads its memory again, then times
// the timed schedules' occurrences.
func (r *schedulesRun) run(ctx context.Context, rep *SchedulesReport) error {
	cfg, s := r.cfg, r.soak
	progress := progressOr(cfg.Progress)
	if err := s.start(ctx); err != nil {
		return err
	}
	r.occ, r.warm = newLateness(GroupOccurrences), newLateness(GroupDueInWarmup)
	if err := r.startScheduler(ctx); err != nil {
		return err
	}
	r.watchServe()
	rules := kdelay.Rules{Topics: s.in.Topics(), MaxDelay: kdelay.DefaultMaxDelay}
	if err := r.waitTopic(ctx, rules.Topics.Schedules()); err != nil {
		return err
	}
	if err := sleepUntil(ctx, time.Now().Add(cfg.Settle)); err != nil {
		return err
	}
	rep.RSSEmpty = s.in.Usage().RSS

	idle := cfg.Schedules - cfg.Timed
	fmt.Fprintf(progress, "schedules: writing %d schedules\n", idle)
	start := time.Now()
	if err := r.writeIdle(ctx, rules, idle); err != nil {
		return err
	}
	written := time.Now()
	rep.Write = written.Sub(start)
	fmt.Fprintf(progress, "schedules: written in %s; waiting for kdelay serve to load them\n", rep.Write.Round(time.Millisecond))
	if err := r.waitLoaded(ctx, idle); err != nil {
		return err
	}
	rep.Load = time.Since(written)
	fmt.Fprintf(progress, "schedules: loaded in %s; settling for %s\n", rep.Load.Round(time.Millisecond), cfg.Settle)
	if err := sleepUntil(ctx, time.Now().Add(cfg.Settle)); err != nil {
		return err
	}
	rep.RSSLoaded = s.in.Usage().RSS
	if err := r.readIndex(ctx, rep, rules.Topics.Schedules()); err != nil {
		return err
	}

	fmt.Fprintf(progress, "schedules: timing %d schedules @every %s for %s\n", cfg.Timed, cfg.Every, cfg.For)
	end, err := r.writeTimed(ctx, rules)
	if err != nil {
		return err
	}
	return s.coll.waitFor(ctx, end.Add(cfg.Grace), func() bool {
		for _, l := range []*lateness{r.occ, r.warm, s.floor} {
			if sent, delivered := s.coll.of(l); delivered < sent {
				return false
			}
		}
		return true
	})
}

// startScheduler runs a scheduler beside an InProcess forwarder, as
// kdelay serve runs one beside its own.
func (r *schedulesRun) startScheduler(ctx context.Context) error {
	if _, ok := r.cfg.Runner.(InProcess); !ok {
		return nil
	}
	s := r.soak
	sched, err := schedule.New(schedule.Config{
		Brokers: s.c.brokers, Topics: s.in.Topics(), Group: s.in.Group(), ExactlyOnce: r.cfg.Delivery == forwarder.ExactlyOnce,
		InstanceID: s.in.Group() + "-schedules", Partitions: r.cfg.Partitions, ClientOpts: s.c.opts, Logger: r.cfg.Logger,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	r.sched, r.stopSched = sched, func() error { cancel(); return <-done }
	return nil
}

// watchServe reads serve's memory every Interval until close.
func (r *schedulesRun) watchServe() {
	r.watch = &procWatch{pid: r.soak.serve.pid}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		for k := 0; ; k++ {
			r.watch.read(time.Since(start))
			if sleepUntil(ctx, start.Add(time.Duration(k+1)*r.cfg.Interval)) != nil {
				return
			}
		}
	}()
	r.stopWatch = func() { cancel(); <-done }
}

// waitTopic returns once serve has created topic.
func (r *schedulesRun) waitTopic(ctx context.Context, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		md, err := r.soak.c.adm.Metadata(ctx, topic)
		if td, ok := md.Topics[topic]; err == nil && ok && td.Err == nil {
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return fmt.Errorf("kdelay serve did not create %s within a minute: %w", topic, err)
		}
	}
}

// writeIdle writes n schedules that fire once a day at an hour eleven to
// twelve hours away, none within the run, each with a value of valueSize
// bytes, as fast as the client takes them.
func (r *schedulesRun) writeIdle(ctx context.Context, rules kdelay.Rules, n int) error {
	now := time.Now()
	at := now.UTC().Add(12 * time.Hour)
	f := kdelay.ScheduleFields{Spec: fmt.Sprintf("0 %d %d * * *", at.Minute(), at.Hour()), Target: r.soak.s.target}
	value := randomValue()
	var failed atomic.Pointer[error] // the first the broker refused
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, _, err := schedule.Record(rules, "idle-"+strconv.Itoa(i), f, value, nil, now)
		if err != nil {
			return err
		}
		r.soak.c.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := r.soak.c.cl.Flush(ctx); err != nil {
		return err
	}
	if err := failed.Load(); err != nil {
		return fmt.Errorf("write the schedules: %w", *err)
	}
	return nil
}

// waitLoaded returns once serve has at least n schedules in force.
func (r *schedulesRun) waitLoaded(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	for {
		if got, err := r.inForce(ctx); err == nil && got >= n {
			return nil
		}
		if err := r.soak.stopped(); err != nil {
			return err
		}
		if err := sleepUntil(ctx, time.Now().Add(r.cfg.Interval)); err != nil {
			got, _ := r.inForce(context.Background())
			return fmt.Errorf("kdelay serve has %d of %d schedules in force: %w", got, n, err)
		}
	}
}

// inForce is the number of schedules serve has in force: its
// kdelay_schedules, or the in-process scheduler's.
func (r *schedulesRun) inForce(ctx context.Context) (int, error) {
	if r.sched != nil {
		return r.sched.Stats().Schedules, nil
	}
	m, err := readMetrics(ctx, r.soak.http, r.soak.serve.admin, []string{schedulesMetric})
	return int(m[schedulesMetric]), err
}

// readIndex reads what serve's scheduler holds for the schedules, and the
// partitions of the schedules topic they are in.
func (r *schedulesRun) readIndex(ctx context.Context, rep *SchedulesReport, topic string) error {
	md, err := r.soak.c.adm.Metadata(ctx, topic)
	if err != nil {
		return fmt.Errorf("read the partitions of %s: %w", topic, err)
	}
	rep.Partitions = len(md.Topics[topic].Partitions)
	if r.sched != nil {
		rep.IndexBytes = r.sched.Stats().IndexBytes
		return nil
	}
	// A kdelay serve from before the index has no such metric: the run
	// goes on, the index unread (-1), as one compared against it must.
	m, _ := readMetrics(ctx, r.soak.http, r.soak.serve.admin, []string{indexMetric})
	if v, ok := m[indexMetric]; ok {
		rep.IndexBytes = int64(v)
	}
	return nil
}

// writeTimed writes the timed schedules, @every Every, and expects each of
// their occurrences due within For at the target, with a floor twin for
// each one due after the warm-up. It returns when the timed span ends.
func (r *schedulesRun) writeTimed(ctx context.Context, rules kdelay.Rules) (time.Time, error) {
	cfg, s := r.cfg, r.soak
	now := time.Now()
	end, judgedFrom := now.Add(cfg.For), now.Add(cfg.Warmup)
	f := kdelay.ScheduleFields{Spec: "@every " + cfg.Every.String(), Target: s.s.target}
	var recs []*kgo.Record
	for i := range cfg.Timed {
		id := "timed-" + strconv.Itoa(i)
		rec, sched, err := schedule.Record(rules, id, f, randomValue(), nil, now)
		if err != nil {
			return end, err
		}
		for at := sched.Next(sched.Start); !at.After(end); at = sched.Next(at) {
			if at.Before(judgedFrom) {
				s.coll.expectNamed(kdelay.OccurrenceID(id, at), r.warm)
				continue
			}
			s.coll.expectNamed(kdelay.OccurrenceID(id, at), r.occ)
			s.s.floorAt(s.coll.expect(s.floor), at, nil)
		}
		recs = append(recs, rec)
	}
	if err := s.c.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return end, fmt.Errorf("write the timed schedules: %w", err)
	}
	return end, nil
}

// close stops the scheduler, the watch and the soak's processes, and
// fills in what they measured.
func (r *schedulesRun) close(rep *SchedulesReport) error {
	var errs []error
	if r.stopSched != nil {
		errs = append(errs, r.stopSched())
	}
	s := r.soak
	errs = append(errs, s.close())
	if r.stopWatch != nil {
		r.stopWatch()
		p := r.watch.figures(s.serveUsage)
		// The peak is the highest of every read, the report's own
		// included: the kernel's high-water mark (VmHWM) is updated
		// lazily from per-CPU counters, and a later one was seen a few
		// pages below an earlier VmRSS (CI, 2026-11-30: 28 KiB).
		rep.PeakRSS, rep.Shared = p.PeakRSS, s.serveUsage.Shared
		if p.PeakRSS > 0 {
			rep.PeakRSS = max(p.PeakRSS, rep.RSSEmpty, rep.RSSLoaded)
		}
	}
	if r.occ != nil {
		rep.Occurrences, rep.Warm, rep.Floor = r.occ.summary(), r.warm.summary(), s.floor.summary()
	}
	return errors.Join(errs...)
}
