package forwarder

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// TestDrainAsksForRelease checks when a forwarder asks for memory to be
// given back: once it has handed on most of a burst that filled at least
// half its share, not while a burst swings its buffer between full and half
// full, and not for a trickle, which leaves nothing to give back.
func TestDrainAsksForRelease(t *testing.T) {
	t.Parallel()
	const limit = 1000
	cases := []struct {
		name        string
		high, bytes int64
		asks        bool
	}{
		{"held half its share, handed it all on", 500, 0, true},
		{"held its share, a quarter left", 1200, 300, true},
		{"a trickle, handed on", 400, 0, false},
		{"a burst resumed at half its share", 1200, 500, false},
		{"a burst still full", 1200, 1100, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := &memoryReleaser{drains: make(chan struct{}, 1)}
			w := &worker{buf: buffer{limit: limit, high: c.high, bytes: c.bytes}, mem: r}
			w.releaseIfDrained()
			if asked := len(r.drains) == 1; asked != c.asks {
				t.Fatalf("held up to %d of %d bytes, holds %d: asked for a release %v, want %v", c.high, limit, c.bytes, asked, c.asks)
			}
			if !c.asks {
				return
			}
			<-r.drains
			w.releaseIfDrained()
			if len(r.drains) != 0 {
				t.Errorf("asked again with nothing held since the last drain, want once per burst")
			}
		})
	}
}

// TestReleasePace checks when memory is released after a drain: once the
// forwarders have fetched less than half a share for memoryReleaseQuiet, not
// while a burst still comes in, and at most once per memoryReleaseInterval,
// drains in between sharing one release at its end. The clock is synctest's.
func TestReleasePace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var freed atomic.Int32
		cfg := Config{Brokers: []string{"127.0.0.1:1"}, freeMemory: func() { freed.Add(1) }}.WithDefaults()
		r := newMemoryReleaser(&cfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- r.run(ctx) }()
		after := func(d time.Duration, n int32, when string) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			if got := freed.Load(); got != n {
				t.Fatalf("%s: %d releases, want %d", when, got, n)
			}
		}

		r.drained()
		after(memoryReleaseQuiet-time.Millisecond, 0, "just before the quiet time after the first drain")
		after(time.Millisecond, 1, "the quiet time after the first drain")

		after(memoryReleaseInterval, 1, "no drain since")
		r.drained()
		synctest.Wait()
		r.fetch(r.busy) // a burst still coming in
		after(memoryReleaseQuiet, 1, "a drain while half a share was fetched")
		r.fetch(r.busy - 1)
		after(memoryReleaseQuiet, 2, "fetching went quiet")

		after(memoryReleaseInterval/2, 2, "half an interval later")
		r.drained()
		r.drained()
		after(memoryReleaseInterval/2-time.Millisecond, 2, "two drains, just before the interval ends")
		after(time.Millisecond, 3, "the interval ended")

		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v, want nil after ctx ends", err)
		}
	})
}

// TestBurstGivesMemoryBack runs the forwarder on kfake: a trickle of records
// does not make it release memory, a burst many times a forwarder's share
// does once it is delivered.
func TestBurstGivesMemoryBack(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	cfg.MaxBufferedBytes = 2 * minBufferShare // the ingress and one level
	freed := make(chan struct{}, 100)
	cfg.freeMemory = func() { freed <- struct{}{} }
	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(cfg)

	for i := range 10 {
		fx.send("trickle-"+strconv.Itoa(i), kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "1s")
	}
	if got := arrived.Until(30*time.Second, atLeast(10)); len(got) < 10 {
		t.Fatalf("%d of 10 trickle records delivered within 30s", len(got))
	}
	for _, topic := range []string{cfg.Topics.Ingress(), cfg.Topics.Level("1s")} {
		if ok, committed, end := fx.committedAll(groupOf(f, topic), topic, 30*time.Second); !ok {
			t.Fatalf("%s: committed %v of %v within 30s", topic, committed, end)
		}
	}
	if n := len(freed); n != 0 {
		t.Errorf("%d releases after 10 records, want none: a trickle leaves nothing to give back", n)
	}

	const burst = 3000 // of 1 KiB: ten times a share
	writer := fx.cluster.Client(kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 1<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range burst {
		r := &kgo.Record{Topic: cfg.Topics.Ingress(), Value: value, Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(fx.target)},
			{Key: kdelay.HeaderDelay, Value: []byte("1s")},
			{Key: kdelay.HeaderID, Value: []byte("burst-" + strconv.Itoa(i))},
		}}
		writer.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Errorf("write burst record %d: %v", i, err)
			}
		})
	}
	if err := writer.Flush(ctx); err != nil {
		t.Fatalf("write the burst: %v", err)
	}
	if got := arrived.Until(60*time.Second, atLeast(10+burst)); len(got) < 10+burst {
		t.Fatalf("%d of %d burst records delivered within 60s", len(got)-10, burst)
	}
	select {
	case <-freed:
	case <-time.After(memoryReleaseInterval + 10*time.Second):
		t.Fatalf("no release within %s of the burst's delivery", memoryReleaseInterval+10*time.Second)
	}
}

// groupOf is the consumer group of f's forwarder that reads topic.
func groupOf(f *Forwarder, topic string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.workers {
		if w.source == topic {
			return w.group
		}
	}
	return ""
}
