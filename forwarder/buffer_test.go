package forwarder

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

// TestBurstIsBounded writes a burst all due in the same millisecond, twenty
// times what a forwarder may hold, straight into a level (as the client
// library does): every record is delivered once and none early, the level's
// forwarder borrowed beyond its reserve, and the forwarders together never
// held more than MaxBufferedBytes plus one fetch per partition.
func TestBurstIsBounded(t *testing.T) {
	t.Parallel()
	burstIsBounded(t, 0)
}

// TestBurstBesideTheIndex is TestBurstIsBounded beside an index that holds
// half of MaxBufferedBytes (Config.SharedBytes, the scheduler's in kdelay
// serve): the records get the other half, and still move the burst.
func TestBurstBesideTheIndex(t *testing.T) {
	t.Parallel()
	burstIsBounded(t, 1<<20)
}

// burstIsBounded runs TestBurstIsBounded beside shared bytes that
// MaxBufferedBytes covers too.
func burstIsBounded(t *testing.T, shared int64) {
	fx := setup(t, []string{"5s"})
	const (
		n     = 20_000
		size  = 1 << 10
		share = 1 << 20 // per forwarder: the ingress and one level
	)
	cfg := fx.cfg
	cfg.MaxBufferedBytes = 2 * share
	cfg.SharedBytes = func() int64 { return shared }
	budget := cfg.MaxBufferedBytes - shared // what records may hold
	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(cfg)
	// Kafka never splits a batch, so a fetch is at least one of the
	// writer's batches: small ones let the fetch size set the step. Left
	// uncompressed, a fetch of so many bytes holds as many records as it
	// would of real data, not thousands of copies of one value.
	writer := fx.cluster.Client(kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(64<<10),
		kgo.ProducerBatchCompression(kgo.NoCompression()))

	level := cfg.Topics.Level("5s")
	written := time.Now().Truncate(time.Millisecond)
	due := written.Add(5 * time.Second)
	value := make([]byte, size)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		id := strconv.Itoa(i)
		writer.Produce(ctx, &kgo.Record{
			Topic:     level,
			Value:     value,
			Timestamp: written,
			Headers:   kdelay.AppendHop([]kgo.RecordHeader(nil), fx.target, id, due),
		}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("write record %s to %s: %v", id, level, err)
			}
		})
	}
	if err := writer.Flush(ctx); err != nil {
		t.Fatalf("write the burst: %v", err)
	}
	if time.Now().After(due) {
		t.Logf("the burst took %s to write, more than its 5s lead: it is late before it starts", time.Since(written))
	}

	got := arrived.Until(60*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	ids := kafkatest.IDs(got)
	if len(ids) != n {
		t.Fatalf("%d of %d records delivered within 60s", len(ids), n)
	}
	if dups := len(got) - n; dups > 0 {
		t.Errorf("%d records delivered twice, want 0", dups)
	}
	for _, a := range got {
		if a.At.Before(due) {
			id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
			t.Errorf("record %s arrived %s early", id, due.Sub(a.At))
		}
	}
	last := got[len(got)-1].At

	f.mu.Lock()
	defer f.mu.Unlock()
	var fetch int64 // the largest fetch of any forwarder
	for _, w := range f.workers {
		w.mu.Lock()
		peak, wfetch := w.buf.peak, w.buf.fetch
		w.mu.Unlock()
		fetch = max(fetch, wfetch)
		if wfetch > share {
			t.Errorf("%s: one fetch brought %d bytes of records, want at most its share %d", w.source, wfetch, share)
		}
		if w.source != level {
			continue
		}
		// Every record it held was due, so it borrowed from the pool
		// (half of the budget) beyond its reserve (half its share of it).
		if reserve := int64(share/2) * budget / cfg.MaxBufferedBytes; peak <= reserve {
			t.Errorf("%s: held up to %d bytes of a burst all due, want more than its reserve %d: it borrows from the pool", w.source, peak, reserve)
		}
		t.Logf("%s held up to %d bytes of records (share %d, one fetch %d); the last record arrived %s after due",
			w.source, peak, share, fetch, last.Sub(due).Round(time.Millisecond))
	}
	// A partition that holds nothing may fetch while the buffer is full: at
	// most one fetch per partition beyond the bound.
	if peak, limit := f.pool.peak.Load(), budget+int64(cfg.Partitions)*fetch; peak > limit {
		t.Errorf("the forwarders held up to %d bytes of records at once, want at most max-buffered-bytes %d less %d held beside, plus one fetch (%d) per partition (%d)",
			peak, cfg.MaxBufferedBytes, shared, fetch, cfg.Partitions)
	}
	if got := f.RecordBudget(); got != budget {
		t.Errorf("RecordBudget %d, want max-buffered-bytes %d less %d held beside", got, cfg.MaxBufferedBytes, shared)
	}
}

// TestFullBufferBurst forwards a burst from one partition of the ingress, the
// other idle: a forwarder whose buffer fills and empties again and again
// must not wait long on the idle partitions' fetch, which the broker holds
// for FetchMaxWait, each time it resumes the busy one. With one client for
// every stage, the level's idle partitions are in that fetch however the
// ingress pauses its own, so the wait is FetchMaxWait at most: at 5s, the
// default while each stage had a client, half the records came in time.
// Since the ingress holds the poll instead (TestFullBufferHoldsThePoll),
// it does not wait at all.
func TestFullBufferBurst(t *testing.T) {
	t.Parallel()
	burstThroughAFullBuffer(t, DefaultFetchMaxWait)
}

// TestFullBufferHoldsThePoll forwards a burst through a full buffer, as
// TestFullBufferBurst, with a FetchMaxWait longer than the test: a worker
// whose buffer is full of records on their way to the target must hold the
// shared client's poll (pollHold), not pause its partitions, whose resume
// would wait behind the idle partitions' fetch for FetchMaxWait at every
// refill: the first would outlast the deadline. Over a million records
// that wait made kdelay move half of what it moves with the hold.
func TestFullBufferHoldsThePoll(t *testing.T) {
	t.Parallel()
	burstThroughAFullBuffer(t, time.Minute)
}

func burstThroughAFullBuffer(t *testing.T, fetchMaxWait time.Duration) {
	fx := setup(t, []string{"5s"})
	const (
		n     = 3_000
		share = 256 << 10 // per forwarder: the ingress and one level
	)
	cfg := fx.cfg
	cfg.MaxBufferedBytes = 2 * share
	cfg.FetchMaxWait = fetchMaxWait
	ingress := cfg.Topics.Ingress()
	fx.cluster.CreateTopic(ingress, cfg.Partitions, nil)
	writeBurst(t, fx, ingress, n, func(int) kgo.RecordHeader { return kgo.RecordHeader{Key: kdelay.HeaderDelay, Value: []byte("0")} })

	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(cfg)
	began := time.Now()
	// Each time the buffer is full, half of the pool (about 80 records
	// here) is acknowledged before the busy partition resumes: waiting
	// FetchMaxWait at each resume would take minutes.
	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	if ids := len(kafkatest.IDs(got)); ids != n {
		t.Fatalf("%d of %d records delivered within 30s: a refill of the full buffer waited on the idle partitions' fetch (FetchMaxWait %s)", ids, n, cfg.FetchMaxWait)
	}
	t.Logf("%d records forwarded in %s through a %d-byte share", n, time.Since(began).Round(time.Millisecond), share)
	checkHeld(t, f, cfg.MaxBufferedBytes, cfg.Partitions)
}

// TestFullBufferOfHeldRecords forwards a burst from one partition of the
// ingress, the other idle, each record due a millisecond after the one before
// and below the smallest level, so that the ingress holds them in memory
// until their time. The buffer fills with records held for their time again
// and again; each time half of it is handed on, the busy partition must be
// fetched before its records are due, but it waits for the idle partitions'
// fetch, which the broker holds for FetchMaxWait (the level's are in it
// whatever the ingress pauses: one client serves every stage). The records
// are late by up to that at every refill, and fall behind when a refill
// brings less than the wait: with 250ms, 1.5s late on Apache Kafka.
func TestFullBufferOfHeldRecords(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"5s"})
	const (
		n      = 2_000
		share  = 256 << 10 // per forwarder: the ingress and one level
		spread = time.Millisecond
	)
	cfg := fx.cfg
	cfg.MaxBufferedBytes = 2 * share
	cfg.FetchMaxWait = DefaultFetchMaxWait
	// A full share must turn the wait short (fetch_wait.go): a refill that
	// waited behind an idle fetch would wait a minute.
	cfg.IdleFetchMaxWait = time.Minute
	ingress := cfg.Topics.Ingress()
	fx.cluster.CreateTopic(ingress, cfg.Partitions, nil)
	// The forwarder first: on Apache Kafka joining its groups takes seconds,
	// which records due meanwhile would count as lateness.
	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(cfg)
	// Due after the forwarder has read the first records, and below the 5s
	// level: every record is held at the ingress.
	first := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	writeBurst(t, fx, ingress, n, func(i int) kgo.RecordHeader {
		due := first.Add(time.Duration(i) * spread)
		return kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: []byte(strconv.FormatInt(due.UnixMilli(), 10))}
	})
	if time.Now().After(first) {
		t.Logf("writing the records took until %s after the first was due: they are late before they are read", time.Since(first))
	}
	last := first.Add((n - 1) * spread)
	got := arrived.Until(last.Sub(time.Now())+20*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	if ids := len(kafkatest.IDs(got)); ids != n {
		t.Fatalf("%d of %d records delivered", ids, n)
	}
	var worst time.Duration
	for _, a := range got {
		s, _ := kafkatest.Header(a.Record, kdelay.HeaderDeliverAt)
		ms, _ := strconv.ParseInt(s, 10, 64)
		late := a.At.Sub(time.UnixMilli(ms))
		if late < 0 {
			t.Errorf("record due at %s arrived %s early", s, -late)
		}
		worst = max(worst, late)
	}
	// Each refill hands on half a share, about 80 records, that were due
	// over 80 ms; a resume that waited on the idle partition's fetch would
	// make records seconds late.
	if worst > time.Second {
		t.Errorf("a record held for its time arrived %s late, want under 1s: resuming after a full buffer waited on the idle partition's fetch (FetchMaxWait %s)",
			worst.Round(time.Millisecond), cfg.FetchMaxWait)
	}
	t.Logf("%d records held and forwarded through a %d-byte share, the latest %s late", n, share, worst.Round(time.Millisecond))
	checkHeld(t, f, cfg.MaxBufferedBytes, cfg.Partitions)
}

// writeBurst writes n records of 1 KiB to partition 0 of ingress, for
// fx.target, record i timed by the header when(i), in batches of 16 KiB.
func writeBurst(t *testing.T, fx *fixture, ingress string, n int, when func(i int) kgo.RecordHeader) {
	t.Helper()
	writer := fx.cluster.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := make([]byte, 1<<10)
	for i := range n {
		writer.Produce(ctx, &kgo.Record{Topic: ingress, Partition: 0, Value: value, Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(fx.target)},
			when(i),
			{Key: kdelay.HeaderID, Value: []byte(strconv.Itoa(i))},
		}}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("write record %d: %v", i, err)
			}
		})
	}
	if err := writer.Flush(ctx); err != nil {
		t.Fatalf("write the burst: %v", err)
	}
}

// checkHeld checks that the forwarders together held at most
// max-buffered-bytes plus one fetch per partition.
func checkHeld(t *testing.T, f *Forwarder, maxBuffered int64, partitions int32) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var fetch int64
	for _, w := range f.workers {
		w.mu.Lock()
		fetch = max(fetch, w.buf.fetch)
		w.mu.Unlock()
	}
	if peak, limit := f.pool.peak.Load(), maxBuffered+int64(partitions)*fetch; peak > limit {
		t.Errorf("the forwarders held up to %d bytes of records at once, want at most max-buffered-bytes %d plus one fetch (%d) per partition", peak, maxBuffered, fetch)
	}
}

// TestFullLevelStillFetchesIdlePartitions fills a level of 5s past what it
// may hold with records of one partition due over the next five seconds,
// then writes a record due now to another partition: it must leave on time.
// What the full level holds is not due within the smallest level, so it may
// not borrow, and its empty partitions go on fetching. Until 2026-11-28 such
// a level, with the default FetchMaxWait of 5s, took its records for due
// soon, paused its whole topic until half its reserve was free, and the
// record came seconds late (at 10,000 records/s the level's partitions took
// turns, up to a second late).
func TestFullLevelStillFetchesIdlePartitions(t *testing.T) {
	t.Parallel()
	inBubble(t, levels.Default().Names(), func(b *bubble) {
		b.cfg.Partitions = 2
		// The smallest share there is, of the ingress and 18 levels: the
		// pool is then a quarter of 19 shares, more than the level lacks.
		b.cfg.MaxBufferedBytes = 19 * minBufferShare
		stop := b.run(b.cfg)
		defer stop()
		// Records of 4 KB, so that a fetch counts about its size on the
		// wire, and the level's reserve is full before the pool is pressed
		// (which would shorten its fetching ahead).
		const n = 100
		arrivals := b.collect(n+1, time.Minute)
		produce := b.producer()
		due := map[string]time.Time{}
		now := time.Now()
		var batch []*kgo.Record
		for i := range n {
			id := strconv.Itoa(i)
			at := now.Add(-5 * time.Second).Add(time.Duration(i+1) * 50 * time.Millisecond)
			due[id] = at.Add(5 * time.Second)
			r := levelRecord(b.cfg, "5s", b.target, id, at, due[id])
			r.Key = make([]byte, 4000)
			batch = append(batch, r)
		}
		produce(batch...)
		time.Sleep(time.Second)
		now = time.Now()
		due["idle"] = now
		r := levelRecord(b.cfg, "5s", b.target, "idle", now.Add(-5*time.Second), now)
		r.Partition = 1
		produce(r)
		checkOnTime(t, arrivals(), due)
	})
}

// TestHeldRecordsDoNotPauseTheirPartition fills a level of 5s with records
// of one partition due over the next five seconds, while another partition
// holds records in memory for 0.9s after their release (remainders below the
// smallest level) and then gets a record due at its release: it must leave
// on time. A full forwarder pauses the partitions that hold what more
// fetching would add to, queued records and records on their way to the
// broker; a remainder waits for its time, and the records behind it must
// not wait for it. Until 2026-11-28 they did: at 10,000 records/s the
// partitions of the 5s level came up to a second late, one after another.
func TestHeldRecordsDoNotPauseTheirPartition(t *testing.T) {
	t.Parallel()
	inBubble(t, levels.Default().Names(), func(b *bubble) {
		b.cfg.Partitions = 2
		b.cfg.MaxBufferedBytes = 19 * minBufferShare // as in TestFullLevelStillFetchesIdlePartitions
		stop := b.run(b.cfg)
		defer stop()
		const held, backlog = 10, 100
		arrivals := b.collect(held+backlog+1, time.Minute)
		produce := b.producer()
		due := map[string]time.Time{}
		// record is due at, in partition p of the 5s level, released at
		// release: 4 KB, so that a fetch counts about its size on the wire.
		record := func(id string, p int32, release, at time.Time) *kgo.Record {
			due[id] = at
			r := levelRecord(b.cfg, "5s", b.target, id, release.Add(-5*time.Second), at)
			r.Partition, r.Key = p, make([]byte, 4000)
			return r
		}
		now := time.Now()
		var batch []*kgo.Record
		for i := range held {
			release := now.Add(500 * time.Millisecond)
			batch = append(batch, record("held"+strconv.Itoa(i), 0, release, release.Add(900*time.Millisecond)))
		}
		for i := range backlog {
			release := now.Add(time.Duration(i+1) * 50 * time.Millisecond)
			batch = append(batch, record(strconv.Itoa(i), 1, release, release))
		}
		produce(batch...)
		time.Sleep(600 * time.Millisecond)
		now = time.Now()
		produce(record("behind", 0, now, now))
		checkOnTime(t, arrivals(), due)
	})
}
