package schedule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestCompact runs a schedule that fires every second on a broker that does
// not compact (kfake with its cleaner off, as kdelay's embedded broker runs
// it), with a schedule that never fires and a deleted one beside it in the
// same partition: the partition holds a bounded number of records, however
// many occurrences were written, and a scheduler that starts afresh from
// what is left goes on where the last stopped: every occurrence once, none
// skipped, the idle schedule still in force and the deleted one still
// deleted.
func TestCompact(t *testing.T) {
	t.Parallel()
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			t.Parallel()
			inBubble(t, exactlyOnce, func(b *bubble) {
				cfg := b.cfg
				cfg.Compact = true
				topics := cfg.WithDefaults().Topics
				partition := placeKey(topics.Schedules(), 3)([]byte("often"))
				idle, gone := sibling(t, topics, "idle", partition), sibling(t, topics, "gone", partition)
				stop := b.run(cfg)
				target := b.collect("")
				b.schedule(idle, []byte("i"), kdelay.HeaderSchedule, "@daily", kdelay.HeaderTarget, b.target)
				b.schedule(gone, []byte("g"), kdelay.HeaderSchedule, "@daily", kdelay.HeaderTarget, b.target)
				b.schedule(gone, nil)
				b.schedule("often", []byte("o"), kdelay.HeaderSchedule, "@every 1s", kdelay.HeaderTarget, b.target)

				// 1,500 occurrences: more than compactAfter progress records
				// (and as many transaction markers, exactly once).
				const n = 1500
				target.Until(30*time.Minute, func(got []kafkatest.Arrival) bool { return len(got) >= n })
				start, end := b.offsets(topics.Schedules(), partition)
				if limit := int64(compactAfter + 2*3 + 10); start == 0 || end-start > limit {
					t.Errorf("after %d occurrences partition %d holds offsets %d to %d; want it started past 0 and at most %d records",
						n, partition, start, end, limit)
				}
				if err := stop(); err != nil {
					t.Fatalf("Run: %v", err)
				}

				b.run(cfg)
				got := target.Until(3*time.Minute, func(got []kafkatest.Arrival) bool { return len(got) >= n+120 })
				ids := kafkatest.IDs(got)
				if len(ids) < n+120 || !consecutive(slices.Collect(maps.Keys(ids)), time.Second) {
					t.Errorf("%d ids from %s to %s, want %d or more, a second apart, none skipped", len(ids), first(ids), last(ids), n+120)
				}
				for id, k := range ids {
					if k > 1 {
						t.Errorf("%s delivered %d times, want once", id, k)
					}
				}
				b.checkListed(topics, idle, gone, start)
			})
		})
	}
}

// sibling is an id beginning with prefix whose schedule is in partition p.
func sibling(t *testing.T, topics kdelay.Topics, prefix string, p int32) string {
	place := placeKey(topics.Schedules(), 3)
	for i := range 1000 {
		if id := fmt.Sprint(prefix, i); place([]byte(id)) == p {
			return id
		}
	}
	t.Fatalf("no id %s<n> in partition %d", prefix, p)
	return ""
}

// offsets are where partition p of topic starts and ends.
func (b *bubble) offsets(topic string, p int32) (start, end int64) {
	adm := kadm.NewClient(b.cl)
	starts, err := adm.ListStartOffsets(context.Background(), topic)
	if err != nil {
		b.t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		b.t.Fatal(err)
	}
	s, _ := starts.Lookup(topic, p)
	e, _ := ends.Lookup(topic, p)
	return s.Offset, e.Offset
}

// checkListed checks that List, reading the compacted topic, gives idle as
// written, from a copy (its own record was before start), and not gone.
func (b *bubble) checkListed(topics kdelay.Topics, idle, gone string, start int64) {
	b.t.Helper()
	cl, err := kgo.NewClient(append(ListOpts(topics), kgo.SeedBrokers(b.cfg.Brokers...), b.dial)...)
	if err != nil {
		b.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	listed, err := List(ctx, cl, kdelay.Rules{Topics: topics})
	if err != nil {
		b.t.Fatalf("List: %v", err)
	}
	var names []string
	for _, l := range listed {
		names = append(names, l.ID)
		if l.ID == idle && (l.Err != nil || l.Schedule.Spec != "@daily" || l.Schedule.Target != b.target || string(l.Value) != "i" ||
			!l.Schedule.Start.Equal(minute(0, 0)) || l.Offset >= start) {
			b.t.Errorf("%s listed as %+v (%v) at offset %d; want @daily to %s with value i, started at %s, from before %d",
				idle, l.Schedule, l.Err, l.Offset, b.target, minute(0, 0), start)
		}
	}
	if want := []string{idle, "often"}; !slices.Equal(names, want) {
		b.t.Errorf("listed %v, want %v: %s deleted", names, want, gone)
	}
}

func first(ids map[string]int) string { return slices.Min(slices.Collect(maps.Keys(ids))) }
func last(ids map[string]int) string  { return slices.Max(slices.Collect(maps.Keys(ids))) }

// TestCompactThenReplace replaces a schedule after a compaction cut its
// record away: the scheduler keeps no schedule in memory, and reads back
// the one being replaced to cancel what it wrote ahead, from the snapshot
// that copies it. The occurrence written a minute ahead is cancelled, and
// the new schedule's are delivered.
func TestCompactThenReplace(t *testing.T) {
	t.Parallel()
	for _, exactlyOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("exactly-once=%v", exactlyOnce), func(t *testing.T) {
			t.Parallel()
			compactThenReplace(t, exactlyOnce)
		})
	}
}

func compactThenReplace(t *testing.T, exactlyOnce bool) {
	inBubble(t, exactlyOnce, func(b *bubble) {
		cfg := b.cfg
		cfg.Compact = true
		topics := cfg.WithDefaults().Topics
		partition := placeKey(topics.Schedules(), 3)([]byte("often"))
		minutely := sibling(t, topics, "minutely", partition)
		b.schedule(minutely, []byte("old"), kdelay.HeaderSchedule, "0 * * * * *", kdelay.HeaderTarget, b.target)
		b.run(cfg)
		target := b.collect("")
		b.schedule("often", []byte("o"), kdelay.HeaderSchedule, "@every 1s", kdelay.HeaderTarget, b.target)

		// The minutely schedule's record is offset 0: a cut past it.
		for deadline := time.Now().Add(time.Hour); ; time.Sleep(10 * time.Second) {
			if start, _ := b.offsets(topics.Schedules(), partition); start > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("partition %d not compacted an hour after the schedules began", partition)
			}
		}
		// Ten seconds into a minute: the next minute's occurrence is
		// written, a minute ahead.
		boundary := time.Now().Truncate(time.Minute).Add(time.Minute)
		time.Sleep(time.Until(boundary.Add(10 * time.Second)))
		b.schedule(minutely, []byte("new"), kdelay.HeaderSchedule, "30 * * * * *", kdelay.HeaderTarget, b.target)
		target.Until(3*time.Minute, func(got []kafkatest.Arrival) bool { return kafkatest.Values(got)["new"] >= 2 })

		ids := kafkatest.IDs(target.Arrivals())
		cancelled := occurrence(minutely, boundary.Add(time.Minute))
		if ids[cancelled] != 0 {
			t.Errorf("%s delivered: the replaced schedule's occurrence written ahead was not cancelled", cancelled)
		}
		for _, at := range []time.Time{boundary.Add(90 * time.Second), boundary.Add(150 * time.Second)} {
			if id := occurrence(minutely, at); ids[id] != 1 {
				t.Errorf("%s delivered %d times, want once: the new schedule's", id, ids[id])
			}
		}
		if id := occurrence(minutely, boundary); ids[id] != 1 {
			t.Errorf("%s delivered %d times, want once: the old schedule's, before the replace", id, ids[id])
		}
	})
}
