package forwarder

import (
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// levelRecord is a record as it would sit in a level topic, written at ts.
func levelRecord(cfg Config, level, target, id string, ts, due time.Time) *kgo.Record {
	return &kgo.Record{
		Topic:     cfg.WithDefaults().Topics.Level(level),
		Value:     []byte(id),
		Timestamp: ts,
		Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderID, Value: []byte(id)},
			{Key: kdelay.HeaderDeliverAt, Value: []byte(strconv.FormatInt(due.UnixMilli(), 10))},
			{Key: kdelay.HeaderTarget, Value: []byte(target)},
		},
	}
}

// TestReplanning checks that each hop plans from the absolute due time: a
// record released late, or written by a clock that runs ahead, still arrives
// at its due time instead of carrying the error forward.
func TestReplanning(t *testing.T) {
	t.Parallel()
	inBubble(t, []string{"1s", "2s", "5s"}, func(b *bubble) {
		stop := b.run(b.cfg)
		defer stop()
		arrivals := b.collect(3, time.Minute)
		now := time.Now()
		due := map[string]time.Time{
			// Released from 5s a second late (kdelay was down): 2.5s are
			// left of its plan, so it goes to 2s, then is held 0.5s.
			"late-hop": now.Add(1500 * time.Millisecond),
			// Written by a clock an hour ahead: its head claims to be due in
			// an hour and 5s, more than the level's 5s, so it is due now.
			"clock-ahead": now.Add(3200 * time.Millisecond),
			// Overdue already: delivered at once, not routed through a level.
			"overdue": now.Add(-time.Minute),
		}
		b.produce(
			levelRecord(b.cfg, "5s", b.target, "late-hop", now.Add(-6*time.Second), due["late-hop"]),
			levelRecord(b.cfg, "5s", b.target, "clock-ahead", now.Add(time.Hour), due["clock-ahead"]),
			levelRecord(b.cfg, "2s", b.target, "overdue", now.Add(-3*time.Second), due["overdue"]),
		)
		for _, a := range arrivals() {
			id := string(a.Value)
			want := due[id].Truncate(time.Millisecond)
			if want.Before(now) {
				want = now
			}
			if late := a.At.Sub(want); late < 0 || late > 20*time.Millisecond {
				t.Errorf("%s arrived %s after it was due, want 0 to 20ms in bubble time", id, late)
			}
		}
	})
}

// TestLateReleaseKeepsLevelOrder checks that a record released late does
// not carry its lateness through the levels after it. A level releases its
// records in offset order, so a hop stamped with the time its release was
// planned, seconds before it was written, waits behind the hops written
// ahead of it, stamped since: late again at every hop while the level is
// busy. Here a level of 1s takes a record every 100ms while one comes out
// of 5s 1.5s late (an outage), with 2.5s left: it must still arrive at its
// due time, and the traffic at theirs.
func TestLateReleaseKeepsLevelOrder(t *testing.T) {
	t.Parallel()
	inBubble(t, []string{"1s", "5s"}, func(b *bubble) {
		onTimeAmidTraffic(t, b, func(now time.Time) (*kgo.Record, time.Time) {
			due := now.Add(2500 * time.Millisecond)
			return levelRecord(b.cfg, "5s", b.target, "late", now.Add(-6500*time.Millisecond), due), due
		})
	})
}

// TestLateHopIsNotCarried checks that a hop written late, as on a slow
// cluster, does not carry its lateness into the next hop: a record written to
// the level of 1s 300 ms after the release it was stamped with leaves behind
// the hops written meanwhile, a second after it was written, with less than a
// second left of its plan. Hopped again, stamped with its planned release, it
// would sit behind the hops written since and leave that much late once more;
// held, it leaves on time.
func TestLateHopIsNotCarried(t *testing.T) {
	t.Parallel()
	inBubble(t, []string{"1s", "5s"}, func(b *bubble) {
		onTimeAmidTraffic(t, b, func(now time.Time) (*kgo.Record, time.Time) {
			stamped := now.Add(-300 * time.Millisecond)
			due := stamped.Add(2 * time.Second)
			return levelRecord(b.cfg, "1s", b.target, "late", stamped, due), due
		})
	})
}

// onTimeAmidTraffic writes a hop to the level of 1s every 100ms for 4s, all
// in one partition, and a second into it the record late makes (its value
// its id), due at the time late returns; and checks that every one arrives
// at its due time.
func onTimeAmidTraffic(t *testing.T, b *bubble, late func(now time.Time) (*kgo.Record, time.Time)) {
	t.Helper()
	b.cfg.Partitions = 1 // every hop in one partition, in the order written
	stop := b.run(b.cfg)
	defer stop()
	const traffic = 40
	arrivals := b.collect(traffic+1, time.Minute)
	due := map[string]time.Time{}
	start := time.Now()
	for i := range traffic {
		now := time.Now()
		if i == 10 {
			r, at := late(now)
			due[string(r.Value)] = at
			b.produce(r)
		}
		id := strconv.Itoa(i)
		due[id] = now.Add(time.Second)
		b.produce(levelRecord(b.cfg, "1s", b.target, id, now, due[id]))
		time.Sleep(start.Add(time.Duration(i+1) * 100 * time.Millisecond).Sub(time.Now()))
	}
	checkOnTime(t, arrivals(), due)
}

// TestSubLevelRemainders checks that a remainder below the smallest level is
// held until its exact due time without blocking the records behind it.
func TestSubLevelRemainders(t *testing.T) {
	t.Parallel()
	inBubble(t, []string{"1s", "5s"}, func(b *bubble) {
		stop := b.run(b.cfg)
		defer stop()
		arrivals := b.collect(3, time.Minute)
		start := time.Now()
		// One key, so all three share each partition on their way: 1.4s is
		// released by the 1s level ahead of 1s, then held for 400ms while
		// 1s, behind it, is delivered.
		send := func(value, delay string) *kgo.Record {
			r := ingress(b.cfg, b.target, value, kdelay.HeaderDelay, delay)
			r.Key = []byte("same")
			return r
		}
		b.produce(send("1.4s", "1400"), send("1s", "1s"), send("300ms", "300ms"))
		got := arrivals()
		var order []string
		for _, a := range got {
			order = append(order, string(a.Value))
			d, _ := time.ParseDuration(string(a.Value))
			if late := a.At.Sub(start.Truncate(time.Millisecond).Add(d)); late < 0 || late > 20*time.Millisecond {
				t.Errorf("%s arrived %s after it was due, want 0 to 20ms in bubble time", a.Value, late)
			}
		}
		if order[0] != "300ms" || order[1] != "1s" || order[2] != "1.4s" {
			t.Errorf("arrival order %v, want [300ms 1s 1.4s]: a held remainder blocked the record behind it", order)
		}
	})
}

// TestPollMode checks the RocketMQ-style mode the benchmark compares with:
// heads are looked at every CheckInterval and nothing in between, so records
// are late by up to one interval, and never early.
func TestPollMode(t *testing.T) {
	t.Parallel()
	inBubble(t, []string{"1s", "5s"}, func(b *bubble) {
		cfg := b.cfg
		cfg.Mode = ModePoll
		stop := b.run(cfg)
		defer stop()
		const n = 40
		arrivals := b.collect(n, time.Minute)
		due := map[string]time.Time{}
		for i := range n {
			d := time.Duration(i) * 237 * time.Millisecond
			id := strconv.Itoa(i)
			due[id] = time.Now().Truncate(time.Millisecond).Add(d)
			b.produce(ingress(cfg, b.target, id, kdelay.HeaderDelay, d.String()))
			time.Sleep(13 * time.Millisecond)
		}
		var lateSum time.Duration
		for _, a := range arrivals() {
			late := a.At.Sub(due[string(a.Value)])
			if late < 0 || late > 120*time.Millisecond {
				t.Errorf("record %s late %s, want 0 to 100ms (one tick) plus 20ms", a.Value, late)
			}
			lateSum += late
		}
		t.Logf("poll mode: mean lateness %s in bubble time", lateSum/n)
	})
}
