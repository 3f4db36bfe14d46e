package forwarder

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestSkipsRoundTrip: what a commit's metadata says is handed on reads back
// the same, runs and lone offsets alike, and metadata that is not kdelay's
// says nothing.
func TestSkipsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, offs := range [][]int64{nil, {10}, {11}, {10, 11, 12, 13}, {12, 14, 15, 16, 40, 1000000}} {
		meta := encodeSkips(10, offs)
		got, err := decodeSkips(10, meta)
		if err != nil || !slices.Equal(got, offs) {
			t.Errorf("decodeSkips(encodeSkips(%v)) = %v, %v", offs, got, err)
		}
	}
	if got, err := decodeSkips(10, "consumer-1-4c1d"); got != nil || err != nil {
		t.Errorf("a member id as metadata reads as skips %v, %v; want none", got, err)
	}
	if _, err := decodeSkips(10, skipsPrefix+"!!"); err == nil {
		t.Error("metadata that is not base64 read without an error")
	}
	// A partition read from a commit that listed the next two records
	// commits them again until it has taken them.
	p := newPartition(0, 5)
	p.next, p.fetched, p.skips = kgo.EpochOffset{Offset: 5}, true, []int64{5, 6}
	if pt := p.txnPoint(); pt.Offset != 5 {
		t.Errorf("commit point %d, want 5", pt.Offset)
	} else if got, err := decodeSkips(pt.Offset, pt.meta); err != nil || !slices.Equal(got, p.skips) {
		t.Errorf("a commit at 5 lists %v (%v), want %v", got, err, p.skips)
	}
	// A window of maxTxnWindow records, every other one handed on: the
	// longest metadata a commit makes with offsets close together.
	var offs []int64
	for i := range int64(maxTxnWindow / 2) {
		offs = append(offs, 12+2*i)
	}
	if meta := encodeSkips(10, offs); len(meta) > maxSkipsMeta {
		t.Errorf("%d skips take %d bytes of metadata, more than %d", len(offs), len(meta), maxSkipsMeta)
	}
}

// TestSkipsLongRuns: a window of maxTxnWindow records all handed on behind
// a held one is one run longer than a reader takes in one (maxSkipRun, the
// bound of every kdelay version): it is written as several, and read back
// whole; a list of more than maxSkips offsets is refused by the reader and
// never committed.
func TestSkipsLongRuns(t *testing.T) {
	t.Parallel()
	var offs []int64
	for i := range int64(maxTxnWindow - 1) {
		offs = append(offs, 11+i)
	}
	if got, err := decodeSkips(10, encodeSkips(10, offs)); err != nil || !slices.Equal(got, offs) {
		t.Errorf("a run of %d read back as %d offsets, %v", len(offs), len(got), err)
	}
	for len(offs) <= maxSkips {
		offs = append(offs, offs[len(offs)-1]+1)
	}
	if _, err := decodeSkips(10, encodeSkips(10, offs)); err == nil {
		t.Errorf("%d offsets read back: a reader takes %d at most", len(offs), maxSkips)
	}
	p := newPartition(0, 10)
	p.next, p.fetched, p.skips = kgo.EpochOffset{Offset: 10}, true, offs
	w := &worker{parts: map[int32]*partition{0: p}}
	if _, ok := w.txnPoints(); ok {
		t.Errorf("a commit listing %d offsets was allowed, want it refused: a reader would not take it", len(offs))
	}
}

// TestExactlyOncePastAHeldRecord writes a record held in memory for seconds
// and, behind it in the same ingress partition, one due at once. In
// exactly-once the second must not wait for the first (it did: a partition
// took nothing behind a held record, which the replay after a crash would
// have delivered again). Then the forwarder crashes while it holds the
// first: the next one delivers it, once, and not the second again, which
// the last commit's metadata lists as handed on.
func TestExactlyOncePastAHeldRecord(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"10s", "20s"})
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	f, done := fx.runUntilCrash(cfg)

	due := map[string]time.Time{
		"held":   sendKeyed(t, fx, "one partition", "held", 8*time.Second),
		"behind": sendKeyed(t, fx, "one partition", "behind", 0),
	}

	got := arrived.Until(due["held"].Sub(time.Now()), atLeast(1))
	if ids := kafkatest.IDs(got); ids["behind"] != 1 || ids["held"] != 0 {
		t.Fatalf("seen before the held record was due: %v, want behind once: it waited for the record held before it", ids)
	}
	// The ingress's offsets are committed with "behind" in the same
	// transaction: the crash comes after it.
	got = replayAfterCrash(t, fx, cfg, f, done, arrived, due["held"])
	if ids := kafkatest.IDs(got); len(ids) != 2 {
		t.Errorf("seen %v, want held and behind", ids)
	}
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		if a.At.Before(due[id]) {
			t.Errorf("%s arrived %s early", id, due[id].Sub(a.At))
		}
	}
}

// TestExactlyOnceTakesManyPastAHeldRecord: behind a record held in memory,
// a thousand due at once in the same ingress partition are all delivered
// while it waits, not only the first few hundred (a partition took 512 from
// its commit point on, and the rest waited until the held one left). Then a
// crash: the last commit lists the thousand in runs longer than a reader
// takes in one, and the next process delivers the held record once and
// none of the thousand again.
func TestExactlyOnceTakesManyPastAHeldRecord(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"10s", "20s"})
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	f, done := fx.runUntilCrash(cfg)

	const behind = 1000
	heldDue := sendKeyed(t, fx, "one partition", "held", 8*time.Second)
	recs := make([]*kgo.Record, behind)
	for i := range recs {
		id := "behind-" + strconv.Itoa(i)
		recs[i] = &kgo.Record{Topic: fx.cfg.Topics.Ingress(), Key: []byte("one partition"), Value: []byte(id), Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(fx.target)},
			{Key: kdelay.HeaderDelay, Value: []byte("0")},
			{Key: kdelay.HeaderID, Value: []byte(id)},
		}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fx.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	got := arrived.Until(heldDue.Sub(time.Now()), atLeast(behind))
	if ids := kafkatest.IDs(got); len(ids) != behind || ids["held"] != 0 {
		t.Fatalf("seen %d ids before the held record was due (held %d times), want the %d behind it: they waited for it",
			len(ids), ids["held"], behind)
	}
	got = replayAfterCrash(t, fx, cfg, f, done, arrived, heldDue)
	if ids := kafkatest.IDs(got); len(ids) != behind+1 {
		t.Errorf("seen %d ids, want %d", len(ids), behind+1)
	}
	for _, a := range got {
		if id, _ := kafkatest.Header(a.Record, kdelay.HeaderID); id == "held" && a.At.Before(heldDue) {
			t.Errorf("held arrived %s early", heldDue.Sub(a.At))
		}
	}
}

// replayAfterCrash crashes f while it holds the record "held", due at
// heldDue, starts the next process, and returns everything the target got
// once that one delivered "held", and a fetch more: a copy of any record
// would come within it. Each id must be seen once.
func replayAfterCrash(t *testing.T, fx *fixture, cfg Config, f *Forwarder, done <-chan struct{},
	arrived *kafkatest.Collector, heldDue time.Time) []kafkatest.Arrival {
	t.Helper()
	crash(t, f, done)
	if !time.Now().Before(heldDue) {
		t.Log("the crash came after the held record was due: the replay below proves less")
	}
	fx.start(cfg)
	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return kafkatest.IDs(got)["held"] > 0 })
	got = arrived.Until(time.Second, atLeast(len(got)+1))
	seenOnce(t, kafkatest.IDs(got))
	return got
}

// TestExactlyOnceRewindsPastAHeldRecord: an aborted transaction rewinds the
// partitions to their last commit, and the replay drops what that commit
// lists as handed on. A record held in memory has a record behind it handed
// on in a committed transaction; the next transaction, which holds a third,
// aborts. Each of the three is seen once.
func TestExactlyOnceRewindsPastAHeldRecord(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"10s", "20s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's control of TxnOffsetCommit to abort a transaction")
	}
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	f, _ := fx.start(cfg)

	due := map[string]time.Time{}
	send := func(id string, delay time.Duration) { due[id] = sendKeyed(t, fx, "one partition", id, delay) }
	send("held", 8*time.Second)
	send("behind", 0)
	if got := arrived.Until(due["held"].Sub(time.Now()), atLeast(1)); kafkatest.IDs(got)["behind"] != 1 {
		t.Fatalf("seen %v before the held record was due, want behind", kafkatest.IDs(got))
	}

	// The next commit of the ingress's offsets fails, and its transaction
	// aborts (franz-go aborts on UNKNOWN_SERVER_ERROR).
	fake := fx.cluster.Fake
	var failed atomic.Bool
	fake.ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		commit := req.(*kmsg.TxnOffsetCommitRequest)
		if failed.Load() || len(commit.Topics) == 0 { // only the ingress's forwarder commits here
			fake.KeepControl()
			return nil, nil, false
		}
		failed.Store(true)
		return kafkatest.RefuseTxnOffsetCommit(commit, kerr.UnknownServerError.Code), nil, true
	})
	send("third", 0)
	waitFor(t, 20*time.Second, "a transaction to abort", func() bool { return f.Stats().Aborted > 0 })

	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == len(due) })
	got = arrived.Until(time.Second, atLeast(len(got)+1)) // a copy would come within a fetch
	seenOnce(t, kafkatest.IDs(got))
	if ids := kafkatest.IDs(got); len(ids) != len(due) {
		t.Errorf("seen %v, want each of %d once", ids, len(due))
	}
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		if a.At.Before(due[id]) {
			t.Errorf("%s arrived %s early", id, due[id].Sub(a.At))
		}
	}
}

// sendKeyed writes to the ingress a record id due delay after its
// timestamp, keyed by key (records of one key share a partition), and
// returns its due time.
func sendKeyed(t *testing.T, fx *fixture, key, id string, delay time.Duration) time.Time {
	t.Helper()
	rec := &kgo.Record{Topic: fx.cfg.Topics.Ingress(), Key: []byte(key), Value: []byte(id), Headers: []kgo.RecordHeader{
		{Key: kdelay.HeaderTarget, Value: []byte(fx.target)},
		{Key: kdelay.HeaderDelay, Value: []byte(strconv.FormatInt(delay.Milliseconds(), 10))},
		{Key: kdelay.HeaderID, Value: []byte(id)},
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fx.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", id, err)
	}
	return rec.Timestamp.Truncate(time.Millisecond).Add(delay)
}
