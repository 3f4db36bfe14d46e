package bench

import (
	"testing"
	"time"
)

func TestLateness(t *testing.T) {
	t.Parallel()
	due := time.UnixMilli(1_790_000_000_000)
	t.Run("percentiles of 1µs to 1000µs", func(t *testing.T) {
		l := newLateness("level=1s")
		for i := range 1000 {
			late := time.Duration(i+1) * µs
			l.sent++
			l.record(late, due, due.Add(late))
		}
		g := l.summary()
		want := Group{Name: "level=1s", Sent: 1000, Delivered: 1000, P50: 500 * µs, P90: 900 * µs, P99: 990 * µs, P999: 999 * µs, Max: 1000 * µs}
		if g != want {
			t.Errorf("summary\n got %+v\nwant %+v", g, want)
		}
	})
	t.Run("early records count apart and as 0 in the percentiles", func(t *testing.T) {
		l := newLateness("floor")
		l.sent = 3
		l.record(-5*time.Millisecond, due, due.Add(-5*time.Millisecond))
		l.record(-time.Millisecond, due, due.Add(-time.Millisecond))
		g := l.summary()
		if g.Early != 2 || g.MostEarly != 5*time.Millisecond || g.Max != 0 || g.Lost != 1 {
			t.Errorf("early %d, most early %s, max %s, lost %d; want 2 early, most 5ms, max 0, 1 lost", g.Early, g.MostEarly, g.Max, g.Lost)
		}
	})
	t.Run("lateness past the histogram's hour counts as an hour", func(t *testing.T) {
		l := newLateness("burst")
		l.sent = 1
		l.record(3*time.Hour, due, due.Add(3*time.Hour))
		if g := l.summary(); g.Max < time.Hour || g.Max > time.Hour+time.Hour/1000 {
			t.Errorf("max %s, want an hour (to 0.1%%)", g.Max)
		}
	})
	t.Run("throughput from the due time to the last arrival", func(t *testing.T) {
		l := newLateness("burst")
		for i := range 100 {
			at := due.Add(time.Duration(i+1) * 10 * time.Millisecond)
			l.record(at.Sub(due), due, at)
		}
		if got := l.throughput(due); got != 100 {
			t.Errorf("throughput %v records/s, want 100 (100 records in 1s)", got)
		}
	})
}
