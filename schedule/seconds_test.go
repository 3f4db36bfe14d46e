package schedule

import (
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// TestWholeSeconds: every occurrence of every form a schedule can take —
// cron with and without seconds, each descriptor, @every — in UTC and in
// zones with daylight saving time, half- and quarter-hour offsets, from a
// record stamped at any millisecond, is a whole second, and so is the
// latest one missed (Last): a slot keeps it in seconds exactly.
func TestWholeSeconds(t *testing.T) {
	t.Parallel()
	specs := []string{
		"0 30 2 * * *", "30 2 * * *", "*/7 * * * * *", "15 */20 * * * *", "0 0 * * * *", "0 30 1-3 * * SUN",
		"0 0 12 29 2 *", "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
		"@every 1s", "@every 90s", "@every 1h", "@every 25h",
	}
	zones := []string{"", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kathmandu", "America/St_Johns"}
	// Record timestamps to the millisecond, as Kafka keeps them: the
	// bubble's start, and days the clocks change.
	starts := []time.Time{
		time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 3, 28, 23, 59, 59, 999e6, time.UTC),
		time.Date(2026, 10, 3, 14, 1, 2, 345e6, time.UTC),
		time.Date(2026, 10, 24, 23, 30, 0, 1e6, time.UTC),
	}
	rules := kdelay.Rules{MaxDelay: kdelay.DefaultMaxDelay}
	for _, spec := range specs {
		for _, zone := range zones {
			for _, start := range starts {
				f := kdelay.ScheduleFields{Spec: spec, TimeZone: zone, Target: "target"}
				s, _, err := kdelay.ParseSchedule(start, []byte("id"), f.Headers(), rules)
				if err != nil {
					t.Fatalf("%q in %q: %v", spec, zone, err)
				}
				checkWhole(t, s, start)
			}
		}
	}
}

// checkWhole walks s's next 400 occurrences from start, those of the next
// five years (a Next's horizon), and checks each, and the latest one before
// a time between two of them.
func checkWhole(t *testing.T, s kdelay.Schedule, start time.Time) {
	t.Helper()
	n := s.Next(start)
	for range 400 {
		if n.IsZero() || n.After(start.AddDate(5, 0, 0)) {
			return
		}
		if sec, exact := seconds(n); !exact || !fromSeconds(sec).Equal(n) {
			t.Fatalf("%q in %s from %s: occurrence %s is not a whole second (kept as %d, %s)", s.Spec, s.Zone, start, n, sec, fromSeconds(sec))
		}
		next := s.Next(n)
		if next.IsZero() {
			return
		}
		if last := s.Last(n, next.Add(-time.Millisecond)); last.Nanosecond() != 0 {
			t.Fatalf("%q in %s: the latest occurrence before %s is %s, not a whole second", s.Spec, s.Zone, next, last)
		}
		n = next
	}
}

// TestSeconds: a time is kept as seconds since 2000 exactly, the zero
// time as 0, and one out of the range is clamped into it and said so: a
// slot's next is never later than the occurrence it stands for.
func TestSeconds(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		t     time.Time
		want  uint32
		exact bool
	}{
		{"the zero time is 0", time.Time{}, 0, true},
		{"the second after 2000 begins is 1", epoch.Add(time.Second), 1, true},
		{"a whole second in another zone", time.Date(2026, 3, 29, 3, 0, 0, 0, time.FixedZone("CEST", 2*3600)), 828061200, true},
		{"the range's last second, in 2136", epoch.Add(4294967295 * time.Second), 4294967295, true},
		{"2000 begins: clamped to 1", epoch, 1, false},
		{"before 2000: clamped to 1", time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC), 1, false},
		{"past 2136: clamped to the last", epoch.Add(4294967296 * time.Second), 4294967295, false},
		{"not a whole second: rounded up", epoch.Add(1500 * time.Millisecond), 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, exact := seconds(c.t)
			if got != c.want || exact != c.exact {
				t.Errorf("seconds(%s) = %d, exact %v; want %d, exact %v", c.t, got, exact, c.want, c.exact)
			}
			if c.exact && !fromSeconds(got).Equal(c.t) {
				t.Errorf("fromSeconds(%d) = %s, want %s back", got, fromSeconds(got), c.t)
			}
		})
	}
}
