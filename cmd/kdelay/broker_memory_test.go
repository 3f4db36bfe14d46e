package main

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestEmbeddedBrokerMemory measures what the embedded broker keeps in memory
// per record, for "The embedded broker" in docs/DEPLOYING.md (KDELAY_TEST_LONG=1 go
// test -count=1 -v -run TestEmbeddedBrokerMemory ./cmd/kdelay). It measures
// the heap of the whole test process, so it runs alone.
//
// It writes records of 100 bytes, one per batch as kdelay writes them at a
// small rate, to 6 partitions, as time passes on a clock of its own: the
// retention window (the default, 24h) holds window records. While the
// first window fills, nothing expires: that is what a pending record costs.
// Then retention runs every tenth of a window, as it runs every minute: the
// heap at its peak, over the records retained, is what a retained record
// costs.
func TestEmbeddedBrokerMemory(t *testing.T) {
	if os.Getenv("KDELAY_TEST_LONG") == "" {
		t.Skip("measures the process heap for 20s; set KDELAY_TEST_LONG=1 to run it alone")
	}
	const window, windows = 100_000, 4
	cfg := embeddedConfig(t, "KDELAY_PARTITIONS=6")
	b := startTestBroker(t, cfg, time.Hour)
	defer b.Close()
	clock := time.Now().Add(-windows * cfg.Retention)
	tick := cfg.Retention / window
	b.retention.now = func() time.Time { return clock }
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic("memory"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 6, -1, nil, "memory"); err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 100)
	_, _ = rand.Read(value)
	write := func(n int) {
		for range n {
			clock = clock.Add(tick)
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: value, Timestamp: clock}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(1_000) // the first segments and connections
	base := liveHeap()
	write(window)
	pending := liveHeap() - base
	var peak uint64
	for range (windows - 1) * 10 {
		write(window / 10)
		if _, err := b.retention.runOnce(ctx); err != nil {
			t.Fatal(err)
		}
		peak = max(peak, liveHeap()-base)
	}
	retained := liveHeap() - base
	t.Logf("per pending record: %d bytes of heap; per retained record: %d at the end, %d at the peak; in data-dir: %d",
		pending/window, retained/window, peak/window, dirBytes(t, cfg.DataDir)/window)
	if peak/window > 400 {
		t.Errorf("a retained record takes up to %d bytes of heap; want at most 400, as docs/DEPLOYING.md says", peak/window)
	}
}

// liveHeap is the heap that survives a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // a second cycle frees what the first left to finalizers
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func dirBytes(t *testing.T, dir string) uint64 {
	var n uint64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += uint64(fi.Size())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
