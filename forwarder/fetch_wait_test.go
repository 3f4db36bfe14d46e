package forwarder

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// lastFetch notes when a client last sent a fetch.
type lastFetch struct{ at atomic.Int64 }

func (l *lastFetch) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == 1 { // Fetch
		l.at.Store(time.Now().UnixNano())
	}
}

// quietFor waits until the client, having fetched once, sent no fetch for
// d, for at most deadline, and reports whether it did. A client that has
// not fetched yet is not quiet: it is still joining its group, which takes
// seconds on a real broker.
func (l *lastFetch) quietFor(d, deadline time.Duration) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(deadline); time.Now().Before(end); <-tick.C {
		if at := l.at.Load(); at != 0 && time.Since(time.Unix(0, at)) > d {
			return true
		}
	}
	return false
}

// fetched waits for the client's first fetch, for at most deadline, and
// reports whether it came.
func (l *lastFetch) fetched(deadline time.Duration) bool {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(deadline); time.Now().Before(end); <-tick.C {
		if l.at.Load() != 0 {
			return true
		}
	}
	return false
}

// An idle forwarder asks the broker for records every IdleFetchMaxWait, not
// every FetchMaxWait (ten times a second), and records written meanwhile
// still leave when due: a new record ends the long poll it is fetched by,
// and a level's paused partition turns the wait short before it resumes.
func TestIdleFetchesWaitLong(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	cfg.IdleFetchMaxWait = time.Minute
	fetches := &lastFetch{}
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithHooks(fetches))
	arrived := fx.cluster.Collect(fx.target)
	fx.start(cfg)

	if !fetches.quietFor(2*time.Second, 30*time.Second) {
		t.Fatalf("the idle forwarder fetched at least every 2s for 30s (FetchMaxWait %s, IdleFetchMaxWait %s)",
			DefaultFetchMaxWait, cfg.IdleFetchMaxWait)
	}
	sent := time.Now()
	fx.send("now", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0", kdelay.HeaderID, "now")
	if got := arrived.Until(10*time.Second, atLeast(1)); len(got) < 1 {
		t.Fatalf("a record due at once was not delivered within 10s of an idle spell: it waited for the long poll")
	}
	t.Logf("due at once, after an idle spell: delivered %s after it was sent", time.Since(sent).Round(time.Millisecond))

	if !fetches.quietFor(2*time.Second, 30*time.Second) {
		t.Fatal("the forwarder did not turn idle again within 30s")
	}
	due := time.Now().Add(1500 * time.Millisecond)
	fx.send("later", kdelay.HeaderTarget, fx.target, kdelay.HeaderDeliverAt, strconv.FormatInt(due.UnixMilli(), 10), kdelay.HeaderID, "later")
	got := arrived.Until(10*time.Second, atLeast(2))
	if len(got) < 2 {
		t.Fatalf("a record due in 1.5s through the 1s level was not delivered within 10s")
	}
	if late := got[1].At.Sub(due.Truncate(time.Millisecond)); late < 0 {
		t.Errorf("the record through the level arrived %s early", -late)
	} else {
		t.Logf("due in 1.5s, through the 1s level: delivered %s late", late.Round(time.Millisecond))
	}
	checkIDs(t, kafkatest.IDs(got), "now", "later")
}

// An idle wait equal to fetch-max-wait turns the idle wait off, as
// CONFIGURATION.md says: the client fetches every FetchMaxWait.
func TestIdleFetchWaitOff(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	cfg.IdleFetchMaxWait = DefaultFetchMaxWait
	fetches := &lastFetch{}
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithHooks(fetches))
	fx.start(cfg)
	if !fetches.fetched(30 * time.Second) {
		t.Fatal("the forwarder sent no fetch within 30s of its start")
	}
	if fetches.quietFor(time.Second, 5*time.Second) {
		t.Fatalf("with idle-fetch-max-wait equal to fetch-max-wait (%s), the idle client went a second without a fetch", DefaultFetchMaxWait)
	}
}

// A level whose share is full of records due long after the idle wait
// needs no prompt fetch until the first of them falls due: its partitions
// resume only as records leave. With a million records pending in the 2h
// level, the level stayed full and kept every fetch short.
func TestFullOfLaterRecordsWaitsLong(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "1m"})
	const (
		n     = 2_000
		share = 256 << 10 // per forwarder: the ingress and two levels
	)
	cfg := fx.cfg
	cfg.MaxBufferedBytes = 3 * share
	// A partition paused as not due brings one fetch: enough of them to
	// fill the level's share.
	cfg.Partitions = 8
	cfg.IdleFetchMaxWait = 20 * time.Second
	fetches := &lastFetch{}
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithHooks(fetches))
	f, _ := fx.start(cfg)

	// Due in a minute, after the smallest level: held for later, which a
	// share may not borrow for, so the level fills.
	level := cfg.Topics.Level("1m")
	writer := fx.cluster.Client(kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	written := time.Now()
	value := make([]byte, 1<<10)
	for i := range n {
		writer.Produce(ctx, &kgo.Record{Topic: level, Value: value, Timestamp: written,
			Headers: kdelay.AppendHop([]kgo.RecordHeader(nil), fx.target, strconv.Itoa(i), written.Add(time.Minute))}, nil)
	}
	if err := writer.Flush(ctx); err != nil {
		t.Fatalf("write the level's records: %v", err)
	}
	// The level's share, and how full it is, for a failure to show.
	levelShare := func() (full bool, state string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, w := range f.workers {
			w.mu.Lock()
			if w.source == level {
				full, state = w.buf.full, fmt.Sprintf("%d of %d bytes held in %d partitions", w.buf.bytes, w.buf.limit, len(w.parts))
			}
			w.mu.Unlock()
		}
		return full, state
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		full, state := levelShare()
		if full {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the level's share was not full within 20s of writing 2 MB to it: %s", state)
		}
	}
	if !fetches.quietFor(2*time.Second, 15*time.Second) {
		t.Fatalf("with the level full of records due in a minute, the forwarder fetched at least every 2s for 15s (IdleFetchMaxWait %s)", cfg.IdleFetchMaxWait)
	}
}

// checkIDs fails t unless ids holds want, in any order.
func checkIDs(t *testing.T, ids map[string]int, want ...string) {
	t.Helper()
	for _, id := range want {
		if ids[id] != 1 {
			t.Errorf("id %s delivered %d times, want once", id, ids[id])
		}
	}
}

// Partitions the group assigns while a fetch is in flight join the fetch
// only once it ends. A process that starts takes its partitions in two
// rounds of a cooperative rebalance: those no member owns at once, the
// others once their owner gave them up. When the first round's fetch found
// nothing and waited IdleFetchMaxWait, the second round's partitions waited
// with it: in a rolling restart on the 3-node cluster every record due in
// that second came 5.5s late. Here the first round is a level only the new
// forwarder has, and the wait one minute.
func TestPartitionsAssignedAfterAnIdleRoundAreFetched(t *testing.T) {
	t.Parallel()
	assignedAfterAnIdleRound(t, func(cfg *Config) { cfg.IdleFetchMaxWait = time.Minute })
}

// The same with a FetchMaxWait of one minute, no shorter than
// IdleFetchMaxWait: the wait never changes, and the first round's fetch
// holds the second round's partitions just as long.
func TestPartitionsAssignedAfterALongFetchAreFetched(t *testing.T) {
	t.Parallel()
	assignedAfterAnIdleRound(t, func(cfg *Config) { cfg.FetchMaxWait = time.Minute })
}

func assignedAfterAnIdleRound(t *testing.T, wait func(*Config)) {
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	wait(&cfg)
	cfg.Partitions = 4
	more := cfg // before the hook: the second forwarder's fetches are not counted
	cfg.InstanceID = "first"
	fetches := &lastFetch{}
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithHooks(fetches))
	arrived := fx.cluster.Collect(fx.target)
	first, _ := fx.start(cfg)
	ingress, level := cfg.Topics.Ingress(), cfg.Topics.Level("1s")
	waitFor(t, 30*time.Second, "the first forwarder to own every ingress partition", func() bool {
		return len(first.owners.of(ingress)) == int(cfg.Partitions)
	})
	if !fetches.quietFor(2*time.Second, 30*time.Second) {
		t.Fatal("the first forwarder did not turn idle within 30s")
	}

	// The second forwarder reads a level the first does not: the group
	// assigns its partitions in the first round, and they stay empty.
	more.Levels, more.InstanceID = mustParse(t, "1s", "1m"), "second"
	second, _ := fx.start(more)
	took := func() map[string][]int32 {
		return map[string][]int32{ingress: second.owners.of(ingress), level: second.owners.of(level)}
	}
	waitFor(t, 30*time.Second, "the second forwarder to take partitions from the first", func() bool {
		m := took()
		return len(m[ingress])+len(m[level]) > 0
	})

	// A record due at once in each partition it took in the second round.
	writer := fx.cluster.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	for topic, ps := range took() {
		for _, p := range ps {
			id := fmt.Sprintf("%s-%d", topic, p)
			ids = append(ids, id)
			r := &kgo.Record{Topic: topic, Partition: p, Value: []byte(id), Timestamp: time.Now()}
			if topic == ingress {
				r.Headers = []kgo.RecordHeader{{Key: kdelay.HeaderTarget, Value: []byte(fx.target)},
					{Key: kdelay.HeaderDelay, Value: []byte("0")}, {Key: kdelay.HeaderID, Value: []byte(id)}}
			} else {
				r.Headers = kdelay.AppendHop([]kgo.RecordHeader(nil), fx.target, id, time.Now())
			}
			if err := writer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("write to %s partition %d: %v", topic, p, err)
			}
		}
	}
	if got := arrived.Until(20*time.Second, atLeast(len(ids))); len(got) < len(ids) {
		t.Fatalf("%d of %d records due at once in the partitions the second round assigned were delivered within 20s: they waited for a fetch of %s",
			len(got), len(ids), max(cfg.FetchMaxWait, cfg.IdleFetchMaxWait))
	}
	checkIDs(t, kafkatest.IDs(arrived.Arrivals()), ids...)
}

// A process idle for longer than pressedLead holds a fetch of IdleFetchMaxWait
// in flight. When a member leaves, the group assigns it the member's
// partitions, which join its fetch only once that one ends: the records a
// stopping process hands back, or that fall due meanwhile, waited up to
// IdleFetchMaxWait. An assignment now ends the long fetch in flight
// (Client.EndFetchesLongerThan, third_party/franz-go).
func TestIdleSurvivorFetchesPartitionsAtOnce(t *testing.T) {
	t.Parallel()
	survivorTakesOver(t, setup(t, []string{"1s"}), nil)
}

// The partitions the group assigns join the client's fetches only once their
// offsets are fetched (OffsetFetch), which can take longer than the short
// spell an assignment starts: in exactly-once it waits for the last owner's
// transaction to end (RequireStable), which on a loaded 3-node cluster took
// seconds. The spell then ended before the partitions were fetchable, a fetch
// of IdleFetchMaxWait went out without them, and a rolling restart's
// records came 6s late (docs/RELIABILITY.md, "The cluster table again"). The
// wait turns short again, and a long fetch ends, once the offsets are in.
func TestPartitionsWhoseOffsetsComeLateAreFetched(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Control to hold the survivor's OffsetFetch; a real broker answers it at once, and holds it only behind a transaction a test cannot leave open in a group it is not a member of")
	}
	survivorTakesOver(t, fx, func() {
		// From now on the broker answers an OffsetFetch four short
		// spells late.
		fake := fx.cluster.Fake
		fake.ControlKey(int16(kmsg.OffsetFetch), func(kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			fake.SleepControl(func() { <-time.After(4 * pressedLead) })
			return nil, nil, false
		})
	})
}

// survivorTakesOver runs two forwarders with a one-minute idle wait until both
// are idle, runs before (if any), stops one, and checks that records due at
// once in the partitions the survivor took over are delivered within 20s:
// within the idle wait, they would have waited for it.
func survivorTakesOver(t *testing.T, fx *fixture, before func()) {
	cfg := fx.cfg
	cfg.IdleFetchMaxWait = time.Minute
	cfg.Partitions = 4
	stays, leaves := cfg, cfg
	stays.InstanceID, leaves.InstanceID = "stays", "leaves"
	quiet := []*lastFetch{{}, {}}
	stays.ClientOpts = append(stays.ClientOpts, kgo.WithHooks(quiet[0]))
	leaves.ClientOpts = append(leaves.ClientOpts, kgo.WithHooks(quiet[1]))
	arrived := fx.cluster.Collect(fx.target)
	survivor, _ := fx.start(stays)
	leaver, stop := fx.start(leaves)
	ingress := cfg.Topics.Ingress()
	waitFor(t, 30*time.Second, "both forwarders to own ingress partitions", func() bool {
		return len(survivor.owners.of(ingress)) > 0 && len(leaver.owners.of(ingress)) > 0
	})
	for i, q := range quiet {
		if !q.quietFor(2*time.Second, 30*time.Second) {
			t.Fatalf("forwarder %d did not turn idle within 30s", i)
		}
	}
	if before != nil {
		before()
	}
	moved := leaver.owners.of(ingress)
	stop()
	waitFor(t, 30*time.Second, "the survivor to take the leaver's ingress partitions", func() bool {
		return len(survivor.owners.of(ingress)) == int(cfg.Partitions)
	})

	writer := fx.cluster.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []string
	for _, p := range moved {
		id := "moved-" + strconv.Itoa(int(p))
		ids = append(ids, id)
		r := &kgo.Record{Topic: ingress, Partition: p, Value: []byte(id), Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(fx.target)}, {Key: kdelay.HeaderDelay, Value: []byte("0")},
			{Key: kdelay.HeaderID, Value: []byte(id)}}}
		if err := writer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("write to ingress partition %d: %v", p, err)
		}
	}
	if got := arrived.Until(20*time.Second, atLeast(len(ids))); len(got) < len(ids) {
		t.Fatalf("%d of %d records due at once in the partitions the survivor took over were delivered within 20s: they waited for its fetch of IdleFetchMaxWait (%s)",
			len(got), len(ids), cfg.IdleFetchMaxWait)
	}
	checkIDs(t, kafkatest.IDs(arrived.Arrivals()), ids...)
}
