package forwarder

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/levels"
)

// TestWriteAmplification measures what a long delay costs in writes: it
// sends one record per delay through the real forwarder, in a synctest
// bubble so that a day passes in seconds, and counts the records and bytes
// each delay left in kdelay's topics and the target. The counts are the
// table in docs/BENCHMARKS.md, "Long delays: write amplification"; the bytes
// are printed (go test -v -run TestWriteAmplification ./forwarder). Longer
// delays are left to the plan (levels.Set.Plan, fuzzed by FuzzPlan): a
// bubble still wakes for every heartbeat, 19 groups a second, so a month
// would take hours.
func TestWriteAmplification(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		levels []string
		delay  time.Duration
		writes int64 // the ingress, each hop, the target
		long   bool  // a day of bubble time: minutes of real time
	}{
		{levels.Default().Names(), time.Hour, 3, false},
		{levels.Default().Names(), 24 * time.Hour, 14, true},
		{append(levels.Default().Names(), "24h"), 24*time.Hour + 30*time.Minute, 4, true},
	} {
		name := fmt.Sprintf("%s with %d levels up to %s", c.delay, len(c.levels), c.levels[len(c.levels)-1])
		t.Run(name, func(t *testing.T) {
			if c.long && os.Getenv("KDELAY_TEST_LONG") == "" {
				t.Skip("a day of bubble time takes 6 minutes; set KDELAY_TEST_LONG=1 to run it")
			}
			t.Parallel()
			inBubble(t, c.levels, func(b *bubble) {
				b.cfg.CheckInterval = time.Hour // exact mode needs no polling
				b.cfg.Retention = 30 * 24 * time.Hour
				stop := b.run(b.cfg)
				defer stop()
				arrivals := b.collect(1, c.delay+time.Hour)
				value := strings.Repeat("v", 1000)
				b.produce(ingress(b.cfg, b.target, value, kdelay.HeaderDelay, c.delay.String(), kdelay.HeaderID, "order-42"))
				delivered := arrivals()[0]
				writes, bytes := b.written(c.levels)
				if writes != c.writes {
					t.Errorf("%d records written for one delivered, want %d", writes, c.writes)
				}
				size := recordBytes(delivered.Key, delivered.Value, delivered.Headers)
				t.Logf("%d writes, %d bytes written for a delivered record of %d bytes: %.1f times", writes, bytes, size, float64(bytes)/float64(size))
			})
		})
	}
}

// written counts the records in the ingress, every level topic and the
// target, and their key, value and header bytes.
func (b *bubble) written(names []string) (records, bytes int64) {
	topics := []string{b.cfg.WithDefaults().Topics.Ingress(), b.target}
	for _, n := range names {
		topics = append(topics, b.cfg.WithDefaults().Topics.Level(n))
	}
	ends, err := kadm.NewClient(b.cl).ListEndOffsets(context.Background(), topics...)
	if err != nil {
		b.t.Fatal(err)
	}
	offsets := map[string]map[int32]kgo.Offset{}
	want := map[string]map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			records += o.Offset
			if offsets[o.Topic] == nil {
				offsets[o.Topic], want[o.Topic] = map[int32]kgo.Offset{}, map[int32]int64{}
			}
			offsets[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
			want[o.Topic][o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.cfg.Brokers...), b.dial, kgo.ConsumePartitions(offsets))
	if err != nil {
		b.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for read := int64(0); read < records; {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.t.Fatalf("read %d of %d records written", read, records)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			read++
			bytes += int64(recordBytes(r.Key, r.Value, r.Headers))
		})
	}
	return records, bytes
}
