package schedule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestRead: the reader gives the committed record at each offset asked,
// in order, on a partition trimmed at its start and past aborted
// transactions, with or without their markers; an offset with no committed
// record is an error at once, not a wait; and offsets closer than a fetch
// cost one sweep of the partition, those further apart one fetch each.
func TestRead(t *testing.T) {
	t.Parallel()
	t.Run("gives the records at the offsets asked, in order", func(t *testing.T) {
		t.Parallel()
		rs := setupRead(t, 300)
		want := []int64{0, 7, 8, 150, 299}
		got, err := rs.read(want)
		if err != nil {
			t.Fatalf("read %v: %v", want, err)
		}
		rs.check(got, want)
	})
	t.Run("reads past a start trimmed by a compaction", func(t *testing.T) {
		t.Parallel()
		rs := setupRead(t, 300)
		rs.trim(100) // as compact.go's trim does
		want := []int64{100, 101, 250}
		got, err := rs.read(want)
		if err != nil {
			t.Fatalf("read %v after trimming to 100: %v", want, err)
		}
		rs.check(got, want)
		if _, err := rs.read([]int64{50, 100}); !errors.Is(err, errMissing) {
			t.Errorf("read offset 50 of a partition trimmed to 100: error %v, want one wrapping %v", err, errMissing)
		}
	})
	t.Run("an offset past the end is missing, at once", func(t *testing.T) {
		t.Parallel()
		rs := setupRead(t, 10)
		for _, at := range []int64{10, 11, 1000} {
			if _, err := rs.read([]int64{3, at}); !errors.Is(err, errMissing) {
				t.Errorf("read offset %d of a partition ending at 10: error %v, want one wrapping %v", at, err, errMissing)
			}
		}
	})
	t.Run("skips an aborted transaction, whose records and markers are missing", func(t *testing.T) {
		t.Parallel()
		rs := setupRead(t, 0)
		before := rs.produce(rs.cl, "before")
		aborted := rs.abort("aborted")
		after := rs.produce(rs.cl, "after")
		rs.stable(after)
		got, err := rs.read([]int64{before, after})
		if err != nil {
			t.Fatalf("read %d and %d around the aborted transaction: %v", before, after, err)
		}
		if len(got) != 2 || string(got[0].Key) != "before" || string(got[1].Key) != "after" {
			t.Errorf("read %d and %d: %v, want the records before and after", before, after, keys(got))
		}
		// Its record, and its abort marker: on Kafka written after the
		// record that follows, which kfake writes before.
		for at := range after + 2 {
			if at == before || at == after {
				continue
			}
			if _, err := rs.read([]int64{at}); !errors.Is(err, errMissing) {
				t.Errorf("read %d, the aborted record (%d) or its marker: error %v, want one wrapping %v", at, aborted, err, errMissing)
			}
		}
	})
	t.Run("reads a partition ending in a transaction aborted without its marker", func(t *testing.T) {
		t.Parallel()
		if os.Getenv(kafkatest.EnvBrokers) != "" {
			t.Skip("a transaction aborted without its marker is what kdelay's embedded broker leaves (kfake), not Kafka")
		}
		broker := hiddenTail(t) // beat at 0, daily at 1, the commit marker at 2, beat again at 3 without a marker
		r := newReader(kafkatest.At(t, broker.ListenAddrs()).Client(), kdelay.Topics{}.Schedules(), fetchBytes)
		var got []*kgo.Record
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := r.read(ctx, 0, []int64{0, 1}, func(rec *kgo.Record) { got = append(got, rec) }); err != nil {
			t.Fatalf("read 0 and 1: %v", err)
		}
		if len(got) != 2 || string(got[0].Key) != "beat" || string(got[1].Key) != "daily" {
			t.Errorf("read 0 and 1: %v, want beat and daily", keys(got))
		}
		if err := r.read(ctx, 0, []int64{3}, func(*kgo.Record) {}); !errors.Is(err, errMissing) {
			t.Errorf("read 3, in the transaction aborted without its marker: error %v, want one wrapping %v (not a wait)", err, errMissing)
		}
	})
	t.Run("offsets closer than a fetch cost one sweep", func(t *testing.T) {
		t.Parallel()
		rs := setupRead(t, 2000)
		var want []int64
		for at := int64(5); at < 2000; at += 10 {
			want = append(want, at)
		}
		got, err := rs.read(want)
		if err != nil {
			t.Fatalf("read every tenth offset: %v", err)
		}
		rs.check(got, want)
		t.Logf("%d offsets ten apart: %+v", len(want), rs.r.stats)
		if s := rs.r.stats; s.seeks != 1 || s.spanned > 2000 || s.fetches >= len(want)/4 {
			t.Errorf("reading %d offsets ten apart cost %+v; want one seek, then fetches each going on from the last, fewer than %d, spanning the partition once at most",
				len(want), s, len(want)/4)
		}
	})
	t.Run("offsets further apart than a fetch cost a fetch each", func(t *testing.T) {
		t.Parallel()
		rs := setupRead(t, 2000)
		want := []int64{0, 1000, 1999}
		got, err := rs.read(want)
		if err != nil {
			t.Fatalf("read %v: %v", want, err)
		}
		rs.check(got, want)
		if s := rs.r.stats; s.fetches != 3 || s.seeks != 3 || s.spanned > 500 {
			t.Errorf("reading %v cost %+v; want three fetches, each a seek, not a sweep of the 2000", want, s)
		}
	})
}

// readSetup is a one-partition topic and a reader of it, with fetches of
// readFetchBytes: small, so that a test's records fill many.
type readSetup struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	topic   string
	cl      *kgo.Client
	r       *reader
}

const readFetchBytes = 16 << 10

// setupRead makes a topic whose one partition holds n records at offsets 0
// to n-1, keyed k<offset> with a 100-byte value, in batches of about 2 KiB
// (uncompressed: the fetches hold as many records as they say).
func setupRead(t *testing.T, n int) *readSetup {
	t.Helper()
	cluster := kafkatest.New(t)
	rs := &readSetup{t: t, cluster: cluster, topic: kafkatest.Name(t)}
	cluster.CreateTopic(rs.topic, 1, nil)
	rs.cl = cluster.Client(kgo.DefaultProduceTopic(rs.topic), kgo.ProducerBatchMaxBytes(2<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	rs.r = newReader(cluster.Client(), rs.topic, readFetchBytes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	value := make([]byte, 100)
	for i := range n {
		rs.cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: value}, func(r *kgo.Record, err error) {
			if err == nil && r.Offset != int64(i) {
				err = fmt.Errorf("at offset %d", r.Offset)
			}
			if err != nil {
				t.Errorf("write record %d: %v", i, err)
			}
		})
	}
	if err := rs.cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return rs
}

// read reads offsets of the partition and returns the records given.
func (rs *readSetup) read(offsets []int64) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	err := rs.r.read(ctx, 0, offsets, func(r *kgo.Record) { got = append(got, r) })
	return got, err
}

// check says whether got are the records setupRead wrote at offsets want.
func (rs *readSetup) check(got []*kgo.Record, want []int64) {
	rs.t.Helper()
	var offsets []int64
	for _, r := range got {
		offsets = append(offsets, r.Offset)
		if string(r.Key) != fmt.Sprintf("k%d", r.Offset) || len(r.Value) != 100 || r.Topic != rs.topic {
			rs.t.Errorf("offset %d: key %q, %d bytes of value, topic %s; want k%d, 100 bytes, %s", r.Offset, r.Key, len(r.Value), r.Topic, r.Offset, rs.topic)
		}
	}
	if !slices.Equal(offsets, want) {
		rs.t.Errorf("read offsets %v, want %v", offsets, want)
	}
}

// trim deletes the records before offset at.
func (rs *readSetup) trim(at int64) {
	rs.t.Helper()
	offsets := kadm.Offsets{}
	offsets.AddOffset(rs.topic, 0, at, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resps, err := kadm.NewClient(rs.cl).DeleteRecords(ctx, offsets)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		rs.t.Fatalf("trim to %d: %v", at, err)
	}
}

// produce writes a record keyed key with cl and returns its offset.
func (rs *readSetup) produce(cl *kgo.Client, key string) int64 {
	rs.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: rs.topic, Key: []byte(key), Value: []byte(key)}).First()
	if err != nil {
		rs.t.Fatalf("write %s: %v", key, err)
	}
	return r.Offset
}

// abort writes a record keyed key in a transaction it aborts, and returns
// its offset; the abort marker is the next.
func (rs *readSetup) abort(key string) int64 {
	rs.t.Helper()
	txn := rs.cluster.Client(kgo.TransactionalID(kafkatest.Name(rs.t)))
	if err := txn.BeginTransaction(); err != nil {
		rs.t.Fatal(err)
	}
	at := rs.produce(txn, key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		rs.t.Fatalf("abort: %v", err)
	}
	return at
}

// stable waits until a read_committed reader may read offset at: Kafka
// writes a transaction's markers after EndTransaction returns, and the
// records after an open transaction are read only once they are written.
// The scheduler reads back only offsets it read read_committed before.
func (rs *readSetup) stable(at int64) {
	rs.t.Helper()
	adm := kadm.NewClient(rs.cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		ends, err := adm.ListCommittedOffsets(ctx, rs.topic)
		if o, ok := ends.Lookup(rs.topic, 0); err == nil && ok && o.Err == nil && o.Offset > at {
			return
		}
		select {
		case <-ctx.Done():
			rs.t.Fatalf("offset %d not committed within 30s (last: %v)", at, err)
		case <-time.After(20 * time.Millisecond): // a deadline-bounded poll
		}
	}
}

func keys(rs []*kgo.Record) []string {
	var ks []string
	for _, r := range rs {
		ks = append(ks, string(r.Key))
	}
	return ks
}
