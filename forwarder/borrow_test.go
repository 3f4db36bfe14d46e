package forwarder

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestRemaindersBorrow forwards records from one partition of the ingress,
// each due a millisecond after the one before and below the smallest level,
// so that the ingress holds them all in memory until their time: a busy
// forwarder next to an idle level. What it holds is due within the smallest
// level, so it borrows from the pool beyond its reserve rather than wait for
// its reserve to drain; the forwarders together stay within the bound. Until
// 2026-11-25 one remainder held kept a forwarder from borrowing, and a level
// holding remainders at 5,000 records/s delivered seconds late.
func TestRemaindersBorrow(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"5s"})
	const (
		n     = 2_000
		share = 256 << 10 // per forwarder: the ingress and one level
	)
	cfg := fx.cfg
	cfg.MaxBufferedBytes = 2 * share
	ingress := cfg.Topics.Ingress()
	fx.cluster.CreateTopic(ingress, cfg.Partitions, nil)
	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(cfg)
	first := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	writeBurst(t, fx, ingress, n, func(i int) kgo.RecordHeader {
		due := first.Add(time.Duration(i) * time.Millisecond)
		return kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: []byte(strconv.FormatInt(due.UnixMilli(), 10))}
	})
	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	if ids := len(kafkatest.IDs(got)); ids != n {
		t.Fatalf("%d of %d records delivered", ids, n)
	}
	checkNoneEarly(t, got)
	peak, fetch := workerPeak(f, IngressLevel)
	if reserve := cfg.bufferReserve(); peak <= reserve+fetch {
		t.Errorf("the ingress held up to %d bytes of remainders, want more than its reserve %d plus one fetch %d: what is due within the smallest level may borrow",
			peak, reserve, fetch)
	}
	checkHeld(t, f, cfg.MaxBufferedBytes, cfg.Partitions)
}

// TestLaterRecordsDoNotStopBorrowing forwards a burst all due at once from
// one partition of a level while another partition holds a record due
// later: what is held for later fits in the level's reserve, so the burst
// borrows from the pool. Until 2026-11-25 one partition not due soon kept the
// whole level to its reserve.
func TestLaterRecordsDoNotStopBorrowing(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"5s"})
	const (
		n     = 2_000
		share = 256 << 10
	)
	cfg := fx.cfg
	cfg.MaxBufferedBytes = 2 * share
	// A short fetch wait makes a record due in 5s one not due soon.
	cfg.FetchMaxWait = 500 * time.Millisecond
	level := cfg.Topics.Level("5s")
	fx.cluster.CreateTopic(level, cfg.Partitions, nil)
	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(cfg)
	writer := fx.cluster.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(16<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	later := time.Now()
	if err := writer.ProduceSync(ctx, &kgo.Record{Topic: level, Partition: 1, Timestamp: later,
		Headers: kdelay.AppendHop([]kgo.RecordHeader(nil), fx.target, "later", later.Add(5*time.Second))}).FirstErr(); err != nil {
		t.Fatalf("write the later record: %v", err)
	}
	w := workerOf(f, "5s")
	waitFor(t, 10*time.Second, "the level to hold the later record as not due soon", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		p := w.parts[1]
		return p != nil && p.notDue
	})
	// Written 5s ago: due as soon as it is read.
	written := time.Now().Add(-5 * time.Second).Truncate(time.Millisecond)
	value := make([]byte, 1<<10)
	for i := range n {
		id := strconv.Itoa(i)
		writer.Produce(ctx, &kgo.Record{Topic: level, Partition: 0, Value: value, Timestamp: written,
			Headers: kdelay.AppendHop([]kgo.RecordHeader(nil), fx.target, id, written.Add(5*time.Second))}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("write record %s: %v", id, err)
			}
		})
	}
	if err := writer.Flush(ctx); err != nil {
		t.Fatalf("write the burst: %v", err)
	}
	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n+1 })
	if ids := len(kafkatest.IDs(got)); ids != n+1 {
		t.Fatalf("%d of %d records delivered", ids, n+1)
	}
	checkNoneEarly(t, got)
	peak, fetch := workerPeak(f, "5s")
	if reserve := cfg.bufferReserve(); peak <= reserve+fetch {
		t.Errorf("the level held up to %d bytes of a burst all due, want more than its reserve %d plus one fetch %d: a record due later kept it from borrowing",
			peak, reserve, fetch)
	}
	checkHeld(t, f, cfg.MaxBufferedBytes, cfg.Partitions)
}

// TestLater checks what a forwarder counts as held for later, which must fit
// in its reserve for it to borrow: queued records due after the smallest
// level from now and records held for a retry, not records due sooner, nor
// remainders, nor records on their way to the broker.
func TestLater(t *testing.T) {
	t.Parallel()
	now := time.Now()
	cfg := Config{Levels: mustParse(t, "1s", "5s"), NowFunc: func() time.Time { return now }}
	w := &worker{cfg: &cfg, wait: 5 * time.Second, parts: map[int32]*partition{}}
	// Written 4.5s, 4s, 3s, 2s and 1s ago to the level of 5s: due in 0.5s,
	// 1s, 2s, 3s and 4s.
	p := newPartition(0, 0)
	var size int64
	for _, ago := range []time.Duration{4500, 4000, 3000, 2000, 1000} {
		size = p.enqueue([]*kgo.Record{{Value: make([]byte, 100), Timestamp: now.Add(-ago * time.Millisecond)}})
	}
	w.parts[0] = p
	if got, want := w.later(now), 3*size; got != want {
		t.Errorf("later = %d, want the three records due after 1s from now: %d", got, want)
	}
	// Taking the head (due in 0.5s) leaves the later ones later.
	remainder := p.take()
	remainder.at = now.Add(500 * time.Millisecond)
	w.hold(remainder)
	if got, want := w.later(now), 3*size; got != want {
		t.Errorf("with a remainder held, later = %d, want %d: a remainder is due within the smallest level", got, want)
	}
	// The next (due in 1s) failed to be produced: held for a retry.
	retry := p.take()
	retry.attempts, retry.at = 1, now.Add(100*time.Millisecond)
	w.hold(retry)
	if got, want := w.later(now), 4*size; got != want {
		t.Errorf("with a record held for a retry, later = %d, want %d: a retry may last until DeliveryTimeout", got, want)
	}
	w.releaseHeld(now, false) // recounts what is held: both stay
	if got, want := w.later(now), 4*size; got != want {
		t.Errorf("after a cycle, later = %d, want %d", got, want)
	}
	if got := w.later(now.Add(10 * time.Second)); got != size {
		t.Errorf("10s on, later = %d, want only the retry's %d: every queued record is due", got, size)
	}
}

// TestPressedLead checks that a forwarder borrowing from the pool fetches
// ahead only the smallest level once more than half the pool is lent, and
// FetchMaxWait ahead otherwise; one within its reserve always FetchMaxWait
// ahead, since a fetch in flight for its quiet partitions may wait that long.
func TestPressedLead(t *testing.T) {
	t.Parallel()
	cfg := Config{Levels: mustParse(t, "1s", "5s"), FetchMaxWait: 5 * time.Second, CheckInterval: 100 * time.Millisecond}
	pool := &bufferPool{limit: 100}
	w := &worker{cfg: &cfg, buf: buffer{limit: 50, bytes: 80, pool: pool}}
	quiet := &worker{cfg: &cfg, buf: buffer{limit: 50, bytes: 10, pool: pool}}
	long, short := 5100*time.Millisecond, pressedLead
	if got := w.resumeLead(); got != long {
		t.Errorf("a borrower with the pool free: lead %s, want FetchMaxWait plus CheckInterval %s", got, long)
	}
	pool.lent.Store(51)
	if got := w.resumeLead(); got != short {
		t.Errorf("a borrower with more than half the pool lent: lead %s, want %s", got, short)
	}
	if got := quiet.resumeLead(); got != long {
		t.Errorf("a forwarder within its reserve with the pool pressed: lead %s, want %s", got, long)
	}
	alone := &worker{cfg: &cfg, buf: buffer{limit: 50, bytes: 80}}
	if got := alone.resumeLead(); got != long {
		t.Errorf("outside a Forwarder: lead %s, want %s", got, long)
	}
}

// checkNoneEarly fails the test for every record that arrived before its
// kdelay-deliver-at.
func checkNoneEarly(t *testing.T, got []kafkatest.Arrival) {
	t.Helper()
	for _, a := range got {
		s, _ := kafkatest.Header(a.Record, kdelay.HeaderDeliverAt)
		ms, _ := strconv.ParseInt(s, 10, 64)
		if a.At.Before(time.UnixMilli(ms)) {
			id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
			t.Errorf("record %s arrived %s early", id, time.UnixMilli(ms).Sub(a.At))
		}
	}
}

// workerOf returns f's forwarder of level.
func workerOf(f *Forwarder, level string) *worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.workers {
		if w.level == level {
			return w
		}
	}
	return nil
}

// workerPeak returns the most bytes the forwarder of level ever held, and
// the most one of its polls brought.
func workerPeak(f *Forwarder, level string) (peak, fetch int64) {
	w := workerOf(f, level)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.peak, w.buf.fetch
}
