package forwarder

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/levels"
)

// TestWriteAmplification measures what a long delay costs in writes: it
// sends one record per delay through the real forwarder, in a synctest
// bubble made quiet (quietOpts) so that 30 days pass in about 2 seconds and
// 400 days in about 20, checks that it is delivered at its due time and
// that what it left in kdelay's topics and the target is the ingress, each
// hop of the routing plan (levels.Set.Plan) and the target, no more, and
// prints their count and bytes: the measured table in docs/BENCHMARKS.md,
// "Long delays: write amplification" (KDELAY_TEST_LONG=1 go test -count=1
// -v -run TestWriteAmplification ./forwarder).
func TestWriteAmplification(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	withDays := append(levels.Default().Names(), "24h")
	withWeeks := append(levels.Default().Names(), "24h", "168h")
	for _, c := range []struct {
		levels []string
		delay  time.Duration
		long   bool // 400 days of bubble time: 20 seconds of real time
	}{
		{levels.Default().Names(), time.Hour, false},
		{levels.Default().Names(), day, false},
		{withDays, day + 30*time.Minute, false},
		{levels.Default().Names(), 30 * day, false},
		{withWeeks, 30 * day, false},
		{levels.Default().Names(), 400 * day, true},
		{withWeeks, 400 * day, true},
	} {
		name := fmt.Sprintf("%s with %d levels up to %s", kdelay.DurationText(c.delay), len(c.levels), c.levels[len(c.levels)-1])
		t.Run(name, func(t *testing.T) {
			if c.long && os.Getenv("KDELAY_TEST_LONG") == "" {
				t.Skip("400 days of bubble time take 20s of real time; set KDELAY_TEST_LONG=1 to run it")
			}
			t.Parallel()
			start := time.Now() // outside the bubble: real time
			inBubble(t, c.levels, func(b *bubble) {
				quiet(b)
				b.cfg.Retention = c.delay + b.cfg.Levels.Largest().Delay + time.Hour // every record written is still there to count
				stop := b.run(b.cfg)
				defer stop()
				delivered := b.deliverOne(c.delay)
				hops, _ := b.cfg.Levels.Plan(c.delay)
				want := int64(len(hops)) + 2 // the ingress, each hop, the target
				writes, bytes := b.written(c.levels)
				if writes != want {
					t.Errorf("%d records written for one delivered, want %d: the ingress, the target and the plan's hops (%d)", writes, want, len(hops))
				}
				size := recordBytes(delivered.Key, delivered.Value, delivered.Headers)
				t.Logf("%d records, %d bytes written for a delivered record of %d bytes: %.1f times", writes, bytes, size, float64(bytes)/float64(size))
			}, quietBubble())
			t.Logf("%s of real time", time.Since(start).Round(10*time.Millisecond))
		})
	}
}

// deliverOne sends a record of 1,000 bytes with the given delay and returns
// it as delivered, failing the test unless it arrives at its due time.
func (b *bubble) deliverOne(delay time.Duration) *kgo.Record {
	sent := time.Now()
	r := ingress(b.cfg, b.target, strings.Repeat("v", 1000), kdelay.HeaderDelay, kdelay.DurationText(delay), kdelay.HeaderID, "order-42")
	r.Timestamp = sent
	b.produce(r)
	delivered, at := b.firstArrival(delay + time.Hour)
	due := kdelay.CeilMillis(sent.Truncate(time.Millisecond).Add(delay)) // Kafka timestamps are milliseconds
	late := at.Sub(due)
	// In the bubble the machine adds no latency: at most kgo's 10ms pause
	// between metadata loads, paid the first time a client produces to a
	// topic (TestNeverEarly).
	if late < 0 || late > 20*time.Millisecond {
		b.t.Errorf("delivered %s after its due time, want between 0 and 20ms", late)
	}
	return delivered
}

// A bubble's clock jumps to the next timer once every goroutine waits, so
// its real time is the number of times something wakes, not the time that
// passes. An idle kdelay wakes for every client's heartbeat (a second, 19
// groups), empty fetch (5s), metadata refresh (5m) and idle-connection check
// (20s), and kfake has every client that does not refuse push its metrics
// (30s): a day of that took 6 minutes, 400 days would take 40 hours.
// quietOpts make heartbeats and empty fetches 12 and 24 days apart, metadata
// refreshes and idle-connection checks as rare as franz-go allows, and refuse
// the metrics. That changes no record written: a hop is decided by the record's
// due time and the time it was due to leave its level (worker.route),
// nothing else; a fetch ends the moment a record is written to one of its
// partitions, however long it may wait; no member joins or leaves during
// the test, so heartbeats have no rebalance to announce; metadata,
// connections and metrics are the clients' own bookkeeping.

// quietSession is the session timeout in the bubble: franz-go sends it as
// int32 milliseconds, at most 24.8 days.
const quietSession = 24 * 24 * time.Hour

// quietBubble lets the cluster accept quietSession (kfake's default limit
// is 5 minutes) and makes the bubble's own client quiet.
func quietBubble() bubbleOpt {
	return bubbleOpt{cluster: []kfake.Opt{kfake.GroupMaxSessionTimeout(quietSession)}, client: quietOpts()}
}

// quiet makes the forwarder b runs wake only for the records it moves.
func quiet(b *bubble) {
	b.cfg.SessionTimeout = quietSession
	// A paused partition resumes FetchMaxWait ahead of its records, so
	// kdelay must know the fetch wait its clients use: here, longer than
	// any level, nothing stays paused.
	b.cfg.FetchMaxWait = quietSession
	b.cfg.CheckInterval = time.Hour // exact mode needs no polling
	b.cfg.ClientOpts = append(b.cfg.ClientOpts, quietOpts()...)
}

// quietOpts make a client's periodic requests as rare as franz-go allows.
func quietOpts() []kgo.Opt {
	return []kgo.Opt{
		// ClientOpts reach kdelay's clients without a group too, and
		// franz-go refuses a heartbeat longer than the session. Beating
		// twice a session, a heartbeat never races the session's end.
		kgo.SessionTimeout(quietSession),
		kgo.HeartbeatInterval(quietSession / 2),
		// The control topic's reader takes no fetch wait from kdelay's
		// Config: it gets this one.
		kgo.FetchMaxWait(quietSession),
		kgo.MetadataMaxAge(time.Hour),
		kgo.ConnIdleTimeout(15 * time.Minute),
		kgo.DisableClientMetrics(),
	}
}

// firstArrival waits up to limit of bubble time for a record on the target
// and returns it with the bubble time it arrived. It waits in a fetch: the
// collector of b.collect looks at what arrived every 10ms, a hundred
// wake-ups a second of bubble time, hours of real time for a year of it.
func (b *bubble) firstArrival(limit time.Duration) (*kgo.Record, time.Time) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.cfg.Brokers...), b.dial,
		kgo.ConsumeTopics(b.target), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, quietOpts()...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.t.Fatalf("no record arrived on %s within %s", b.target, limit)
		}
		if rs := fetches.Records(); len(rs) > 0 {
			return rs[0], time.Now()
		}
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
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			records += o.Offset
			if offsets[o.Topic] == nil {
				offsets[o.Topic] = map[int32]kgo.Offset{}
			}
			offsets[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
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
