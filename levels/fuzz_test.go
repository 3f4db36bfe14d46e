package levels

import (
	"strings"
	"testing"
	"time"
)

// FuzzPlan checks the routing table for any level set Parse accepts and any
// delay: every hop is the largest level that fits the time still remaining,
// so no hop carries a record past its due time, and the hops plus the
// remainder held in memory add up to the delay exactly. Run it with
//
//	go test -fuzz FuzzPlan -fuzztime 1m ./levels
func FuzzPlan(f *testing.F) {
	f.Add("1s,5s,10s,30s,1m,2m,3m,4m,5m,6m,7m,8m,9m,10m,20m,30m,1h,2h", int64(5*time.Hour+time.Millisecond))
	f.Add("1s,5s", int64(12*time.Second))
	f.Add("90s,1ms,1d", int64(-1))
	f.Add("1h,1h", int64(time.Hour))
	f.Add("3ms", int64(1<<62))
	f.Fuzz(func(t *testing.T, names string, delay int64) {
		s, err := Parse(strings.Split(names, ","))
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("Parse(%q) refused with an empty reason", names)
			}
			return
		}
		d := time.Duration(delay)
		// Keep the hop count bounded: 400 days of the smallest level at most.
		if d > 400*24*time.Hour || d/s.Smallest().Delay > 1_000_000 {
			return
		}
		hops, rem := s.Plan(d)
		left := max(d, 0)
		for i, h := range hops {
			if h.Delay > left {
				t.Fatalf("hop %d (%s) is longer than the %s left of %s", i, h.Name, left, d)
			}
			if next, ok := s.For(left); !ok || next != h {
				t.Fatalf("hop %d is %s, want the largest level that fits %s: %v", i, h.Name, left, next)
			}
			left -= h.Delay
		}
		if rem != left || rem >= s.Smallest().Delay {
			t.Fatalf("remainder %s, want %s and below the smallest level %s", rem, left, s.Smallest().Name)
		}
	})
}
