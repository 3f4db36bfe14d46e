package forwarder

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay"
)

// worker forwards the records of one source topic: the ingress topic (wait 0)
// or one level topic (wait = the level's delay). Kafka spreads the partitions
// over every kdelay process in its consumer group, "<group>", which every
// stage of a process shares with one client (client_shared.go).
//
// A partition's records become due in offset order, so the worker looks only
// at each partition's head. While the head is not due the partition is paused,
// so its records stay in Kafka rather than in memory, and the loop sleeps until
// the earliest thing it must do (see wakeAt): with nothing due it sleeps until
// woken (wake.go), which a fetch of a new record does at once. It does not
// poll: the poll loop of its client does (poll.go), and hands it what it
// fetches (take).
type worker struct {
	cfg    *Config
	level  string        // the level's name, IngressLevel for the ingress
	obs    LevelObserver // told what the worker does
	source string        // topic consumed
	group  string        // consumer group: Config.Group
	wait   time.Duration // how long a record waits in source
	rules  kdelay.Rules
	log    *slog.Logger
	cl     *stageClient // the Kafka client serving the worker's stage
	txn    *txnLoop     // the process's transaction; nil in at-least-once delivery
	start  time.Time    // anchors the ticks of ModePoll
	dlqMax int          // the largest dead letter the DLQ and the client take, in bytes
	cmds   *commands    // commands in force (command_obey.go); nil when the Forwarder reads none
	owners *owners      // the partitions this process owns, shared by its workers

	// assigned is set once the group has assigned partitions to the worker
	// (possibly none: a group with more members than partitions), and
	// cleared when it loses them, until it joins again. See Levels.
	assigned atomic.Bool

	// ownsFirst is set while the worker owns partition 0 of its source: the
	// ingress router that does is the one process that reports unmatched
	// commands (command_control.go).
	ownsFirst atomic.Bool

	// mu guards everything below it against the rebalance callbacks, which
	// run on the client's goroutines.
	mu         sync.Mutex
	parts      map[int32]*partition
	held       heldQueue // records held in memory until a time (held.go)
	heldRetry  int64     // bytes of held records waiting to be retried, of partitions not gone
	commits    commits   // the background commit (commit.go)
	stats      Stats
	handing    handing // when it last handed on, and what failed since (state_stuck.go)
	buf        buffer
	cmdVersion uint64    // the commands' version when held records were last looked at
	scans      scanState // looking for records that commands name (command_scan.go)
	runCtx     context.Context
	stopped    bool // shut down: fetches of a shared client are no longer taken

	// What produce callbacks, the background commit and the scan leave for
	// the loop, under a lock of its own (inbox.go).
	inbox inbox

	wakeCh chan struct{} // the loop's wake-ups (wake.go); capacity 1

	mem *memoryReleaser // told when the worker drains; nil outside a Forwarder

	// What the group's callbacks, on the client's goroutines, leave for
	// the loop and take from it, under a lock of its own (rebalance.go).
	handoff handoff

	tx txnState // exactly-once only, under mu (txn.go)
}

// metadataMaxAge is how often a forwarder's client reloads metadata:
// the longest a partition added to its source waits before it is read
// (docs/SCALING.md, TestAddedPartitions). A metadata request per client
// every 30 s is a few percent of what an idle kdelay sends.
const metadataMaxAge = 30 * time.Second

type ack struct {
	e   *entry
	err error
}

// newWorker makes an at-least-once worker for stage s with a Kafka client
// of its own, in a consumer group of its own: the tests' way to run one
// stage alone. dlqMax is the DLQ's max.message.bytes, 0 if unknown. owners
// is shared by the process's workers; it is given here since the group may
// assign partitions as soon as the client exists.
func newWorker(cfg *Config, s stage, dlqMax int, owners *owners) (*worker, error) {
	if cfg.Delivery == ExactlyOnce {
		return nil, errors.New("exactly-once runs its stages on one client (client_shared.go)")
	}
	w := makeWorker(cfg, s, owners)
	opts := append(clientOpts(cfg, w.group, w.source), stageCallbacks(map[string]*worker{w.source: w}, nil, new(atomic.Uint64), nil, nil)...)
	opts = append(opts, cfg.ClientOpts...)
	opts = append(opts, w.obs.ClientOpts()...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	w.cl = newStageClient(cl, w.source, &pollGate{}, true, w.landed)
	w.dlqMax = dlqLimit(w.cl.kafka, cfg, dlqMax)
	return w, nil
}

// makeWorker makes the worker for stage s, with no client yet.
func makeWorker(cfg *Config, s stage, owners *owners) *worker {
	return &worker{
		cfg:     cfg,
		handing: handing{at: cfg.NowFunc()},
		level:   s.level,
		obs:     cfg.Observer.Level(s.level),
		source:  s.topic,
		group:   cfg.Group + s.group,
		wait:    s.wait,
		rules:   kdelay.Rules{Topics: cfg.Topics, MaxDelay: cfg.MaxDelay},
		log:     cfg.Logger.With("topic", s.topic),
		start:   cfg.NowFunc(),
		parts:   map[int32]*partition{},
		owners:  owners,
		scans:   scanState{side: newPartition(-1, 0)},
		buf:     buffer{limit: cfg.bufferReserve(), whole: cfg.bufferReserve()},
		tx:      txnState{retries: map[retryKey]retryState{}},
		wakeCh:  make(chan struct{}, 1),
	}
}

// clientOpts are the options of a client that reads sources in group.
func clientOpts(cfg *Config, group string, sources ...string) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("kdelay"),
		kgo.ConsumeTopics(sources...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.FetchMaxWait(cfg.FetchMaxWait),
		// Records of an aborted transaction (exactly-once delivery, now or
		// before a switch to at-least-once) were never handed on: reading
		// them would deliver them. Without transactions it changes nothing.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// The client buffers a fetch per broker outside the workers'
		// buffers, and the broker may return one fetch beyond them: keep
		// both small beside the shares, rather than franz-go's 50 MiB.
		kgo.FetchMaxBytes(clientFetchMaxBytes(cfg, len(sources))),
		kgo.FetchMaxPartitionBytes(min(cfg.fetchMaxBytes(), 1<<20)),
		// A due record must leave now: lingering would only add lateness.
		kgo.ProducerLinger(0),
		// What a worker holds is bounded by its buffer (buffer.go), not by
		// the client's count, which only backs it up (produce).
		kgo.MaxBufferedRecords(cfg.maxBufferedRecords()),
		// The client rides out a short failure itself, then hands the
		// broker's error to the loop, which retries until DeliveryTimeout
		// and dead-letters the record with that error.
		kgo.RecordRetries(clientRetries),
		// Like any producer, let the broker create a missing target when its
		// auto.create.topics.enable says so; otherwise the record is refused
		// and dead-lettered with the reason.
		kgo.AllowAutoTopicCreation(),
		// A broker that subscribes clients to KIP-714 metrics (kfake does)
		// would have every client compress and push them while idle.
		kgo.DisableClientMetrics(),
		// Partitions added to a source are owned once the group's leader
		// sees them in its metadata: until then records written there wait
		// unread, late. franz-go's 5 minutes is the Java client's default;
		// for a delay system that is 5 minutes late.
		kgo.MetadataMaxAge(metadataMaxAge),
	}, append(FailoverOpts(), groupOpts(cfg, group)...)...)
}

// clientFetchMaxBytes is how much a fetch of a client that reads sources
// asks a broker for: a fetch a source, up to sharedFetches. The client that
// reads every stage (at-least-once) asked for one a stage, 19 with the
// default levels, 16 MiB on the wire and about three times that decoded,
// held outside the workers' buffers until handed on: a burst of a million
// records due at once peaked at 128-133 MB of RSS, over the 128 MiB the
// defaults are for, and 114-116 MB with 4 (delivered in 6.6-7.3 s rather
// than 9.4-10.6 s: less to collect). Under a load beyond what the machine
// forwards (50,000 records/s), where every fetch comes back full and waits
// to be polled, 4 peaked at 138-140 MB and 2 at 119-128 MB, later by less
// (p99 7.8-12.5 s against 14.8-15.8 s); the burst went as fast (7.4 s, 112
// MB against 7.9 s, 117 MB) and 10,000 records/s as close to the floor. A
// partition brings a quarter of a share at most in any fetch
// (FetchMaxPartitionBytes), so two of them still fill a fetch; franz-go rotates
// the partitions it asks first, and the fetch that follows comes within a
// round trip.
func clientFetchMaxBytes(cfg *Config, sources int) int32 {
	return int32(min(int64(min(sources, sharedFetches))*int64(cfg.fetchMaxBytes()), 50<<20))
}

// sharedFetches is how many stages' fetches one fetch of a client brings at
// most.
const sharedFetches = 2

// dlqLimit is the largest dead letter cl and the DLQ take: the client
// refuses a record larger than its own batch limit before the broker sees
// it. dlqMax is the DLQ's max.message.bytes, 0 if unknown.
func dlqLimit(cl *kgo.Client, cfg *Config, dlqMax int) int {
	limit := int(cl.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32)(cfg.Topics.DLQ()))
	if dlqMax > 0 {
		limit = min(limit, dlqMax)
	}
	return limit
}

// run forwards until ctx ends, then shuts down in this order: stop fetching
// (the poll loop returns), wait for in-flight produces, commit what was
// handed on, leave the group. Records held in memory are not committed, so
// the next owner re-reads them.
func (w *worker) run(ctx context.Context) error {
	w.mu.Lock()
	w.runCtx = ctx
	w.buf.join()
	w.mu.Unlock()
	// After both goroutines below: the client closes at its end, and a poll
	// loop still polling would take that for a failure.
	defer w.shutdown()
	if !w.cl.own {
		return w.loop(ctx) // the Forwarder polls the shared client
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return newPollLoop(w.cl, w.log, map[string]*worker{w.source: w}, nil, pollBurst(w.cl.kafka)).run(gctx)
	})
	g.Go(func() error { return w.loop(gctx) })
	return g.Wait()
}

// loop runs a cycle whenever there may be work, until ctx ends.
func (w *worker) loop(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for ctx.Err() == nil {
		wake := w.cycle(w.cfg.NowFunc())
		w.sleep(ctx, timer, wake)
	}
	return nil
}

// take queues fetched records of the worker's source, and wakes the loop.
func (w *worker) take(fps []kgo.FetchTopicPartition) {
	defer w.wake()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return // left uncommitted: the next owner reads them
	}
	var fetched int64
	for _, fp := range fps {
		if fp.Topic == w.source && len(fp.Records) > 0 {
			p := w.partition(fp.Partition, fp.Records[0].Offset)
			fetched += p.enqueue(fp.Records)
		}
	}
	w.buf.add(fetched)
	w.buf.fetch = max(w.buf.fetch, fetched)
	// Pause now, before the poll loop polls again: a poll strips the
	// buffered fetch of a paused partition (franz-go source.go
	// takeBuffered) and fetches it again once resumed, so a partition
	// paused late would have its records fetched twice.
	w.throttle()
	w.tellWait(w.cfg.NowFunc())
}

func (w *worker) partition(id int32, from int64) *partition {
	p, ok := w.parts[id]
	if !ok {
		p = newPartition(id, from)
		w.parts[id] = p
		if w.txn != nil {
			w.applyInherited(p)
		}
	}
	return p
}

// cycle does the work due at now and returns when it wants to run next.
func (w *worker) cycle(now time.Time) time.Time {
	defer w.producing()()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applyAcks(now)
	w.throttle()
	w.recheckHeld(now)
	w.moveAhead(now)
	w.lookForHidden()
	heads, held, tick := w.clock(now)
	before := w.stats
	// Heads first: routing one may hold it, and releaseHeld then counts it
	// in the next wake-up.
	soonest := w.releaseHeads(heads, now)
	soonest = earliest(soonest, w.releaseHeld(held, false))
	w.throttle() // what waits may have changed (pauseIdle)
	if w.txn == nil {
		w.commit(now)
	}
	w.releaseIfDrained()
	w.inbox.setWakeAfter(w.buf.wakeAfter(w.mayBorrow()))
	w.tellWait(now)
	if after := w.stats; after != before {
		w.log.Debug("forwarded", "delivered", after.Delivered-before.Delivered, "hopped", after.Hopped-before.Hopped,
			"held", after.Held-before.Held, "dead_lettered", after.DeadLettered-before.DeadLettered)
	}
	if w.cfg.Mode == ModePoll {
		return tick
	}
	return w.wakeAt(soonest, now)
}

// clock returns the times heads and held records are compared with, and the
// next tick of ModePoll. ModeExact compares with now. ModePoll compares with
// the last tick and looks again at the next one, as RocketMQ does; the
// ingress still routes on arrival, as RocketMQ dispatches a delayed message
// to its level when it is written.
func (w *worker) clock(now time.Time) (heads, held, next time.Time) {
	if w.cfg.Mode != ModePoll {
		return now, now, time.Time{}
	}
	tick := w.start.Add(now.Sub(w.start).Truncate(w.cfg.CheckInterval))
	heads = tick
	if w.wait == 0 {
		heads = now
	}
	return heads, tick, tick.Add(w.cfg.CheckInterval)
}

// releaseAt is when a record in source is due to leave it. A record that
// claims to have been written in the future (the writer's clock is ahead) is
// due now: trusting it would hold it longer than its level.
func (w *worker) releaseAt(r *kgo.Record, now time.Time) time.Time {
	if r.Timestamp.After(now) {
		return now
	}
	return r.Timestamp.Add(w.wait)
}

// releaseHeads routes every head due by check and returns when the earliest
// remaining head is due (the zero time if none).
func (w *worker) releaseHeads(check, now time.Time) (soonest time.Time) {
	for _, p := range w.parts {
		if p.leaving {
			continue // its callback hands on what it must (markLeaving)
		}
		// In exactly-once, a partition that holds a record in memory
		// takes maxTxnWindow from its commit point on at most
		// (txn_skips.go).
		for len(p.queue) > 0 && (w.txn == nil || p.waiting == 0 || p.roomInWindow()) {
			if len(p.skips) > 0 && p.skipHead() {
				w.drop(p.take()) // handed on before a replay
				continue
			}
			at := w.releaseAt(p.queue[0], now)
			if at.After(check) {
				soonest = earliest(soonest, at)
				break
			}
			e := p.take()
			w.recall(e)
			w.route(e, at, now)
		}
		w.pauseOrResume(p, now)
	}
	return soonest
}

// pauseOrResume keeps a partition paused while its buffered records are not
// due soon, so pending records wait in Kafka, not in memory. It resumes one
// fetch-wait ahead of its last buffered record: a fetch already in flight
// when a partition resumes does not include it, and the records behind must
// arrive before they are due. A full buffer pauses it too (setFetching).
func (w *worker) pauseOrResume(p *partition, now time.Time) {
	p.notDue = false
	if n := len(p.queue); n > 0 {
		ahead := now.Add(w.resumeLead())
		p.notDue = w.releaseAt(p.queue[n-1], now).After(ahead)
	}
	w.setFetching(p)
}

// resumeLead is how long before its last buffered record is due a paused
// partition resumes: the fetch already in flight may last FetchMaxWait, and
// a poll-mode cycle may come CheckInterval late. While the pool is pressed
// (pool.go) and this worker borrows from it, it is pressedLead: memory then
// goes to the records due soonest, not to those of every busy level fetched
// FetchMaxWait ahead (at 10,000 records/s with delays up to a minute, 70 MB
// of records held with a budget large enough to hold them), nor to a whole
// level of 1s fetched as soon as it is written. A borrower's partitions are
// written to, so a fetch in flight ends at the first record. A worker
// within its reserve keeps the whole lead: a quiet level's fetch in flight
// may wait FetchMaxWait for a record, and its own records cost the pool
// nothing.
func (w *worker) resumeLead() time.Duration {
	lead := w.cfg.FetchMaxWait + w.cfg.CheckInterval
	if w.buf.bytes > w.buf.limit && w.buf.pool.pressed() {
		return min(lead, w.cfg.Levels.Smallest().Delay, pressedLead)
	}
	return lead
}

// pressedLead is how far ahead of its records a borrower fetches while the
// pool is pressed: a round trip to a broker and a cycle of the loop on a
// loaded machine, with room to spare. The smallest level (1s), which it was
// until 2026-11-28, let the level of 1s hold everything written to it, and
// at 20,000 records/s the pool ran out: p99 lateness 2.4-3.2 s on Apache
// Kafka, 0.63-0.65 s with this (docs/BENCHMARKS.md, "Sustained rate").
const pressedLead = 250 * time.Millisecond

// earliest returns the earlier of two times, where the zero time means none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
