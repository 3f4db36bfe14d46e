package kdelay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// at reads an RFC 3339 time, for tables.
func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func parseSchedule(t *testing.T, ts time.Time, kv ...string) kdelay.Schedule {
	t.Helper()
	s, _, err := kdelay.ParseSchedule(ts, []byte("s"), hs(kv...), kdelay.Rules{})
	if err != nil {
		t.Fatalf("ParseSchedule: %v", err)
	}
	return s
}

// TestScheduleNext is the table of when a schedule's occurrences are: each
// spec form, and the days a zone's clocks change, in two zones. Each case
// lists the occurrences after from, in order.
func TestScheduleNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers []string // besides kdelay-target
		from    string
		want    []string
	}{
		{"six fields, with seconds", []string{"kdelay-schedule", "15 30 2 * * *"}, "2026-01-10T00:00:00Z",
			[]string{"2026-01-10T02:30:15Z", "2026-01-11T02:30:15Z"}},
		{"five fields, without seconds", []string{"kdelay-schedule", "30 2 * * *"}, "2026-01-10T00:00:00Z",
			[]string{"2026-01-10T02:30:00Z", "2026-01-11T02:30:00Z"}},
		{"every ten seconds", []string{"kdelay-schedule", "*/10 * * * * *"}, "2026-01-10T00:00:05Z",
			[]string{"2026-01-10T00:00:10Z", "2026-01-10T00:00:20Z"}},
		{"weekdays at nine", []string{"kdelay-schedule", "0 0 9 * * MON-FRI"}, "2026-01-09T10:00:00Z", // a Friday
			[]string{"2026-01-12T09:00:00Z", "2026-01-13T09:00:00Z"}},
		{"@hourly", []string{"kdelay-schedule", "@hourly"}, "2026-01-10T00:00:00Z",
			[]string{"2026-01-10T01:00:00Z", "2026-01-10T02:00:00Z"}},
		{"@daily in a zone", []string{"kdelay-schedule", "@daily", "kdelay-time-zone", "Asia/Tokyo"}, "2026-01-10T00:00:00Z",
			[]string{"2026-01-10T15:00:00Z", "2026-01-11T15:00:00Z"}},
		{"@every counts from the time asked", []string{"kdelay-schedule", "@every 90s"}, "2026-01-10T00:00:00.500Z",
			[]string{"2026-01-10T00:01:30Z", "2026-01-10T00:03:00Z"}},
		{"until is the last time", []string{"kdelay-schedule", "@hourly", "kdelay-until", "2026-01-10T02:00:00Z"}, "2026-01-10T00:00:00Z",
			[]string{"2026-01-10T01:00:00Z", "2026-01-10T02:00:00Z", ""}},

		// Europe/Berlin: 2026-03-29 02:00 CET becomes 03:00 CEST (01:00Z);
		// 2026-10-25 03:00 CEST becomes 02:00 CET (01:00Z).
		{"Berlin daily 02:30, spring forward: at the jump, 03:00 CEST", []string{"kdelay-schedule", "0 30 2 * * *", "kdelay-time-zone", "Europe/Berlin"},
			"2026-03-27T12:00:00Z", []string{"2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"Berlin daily 02:30, fall back: once, in the first pass (CEST)", []string{"kdelay-schedule", "0 30 2 * * *", "kdelay-time-zone", "Europe/Berlin"},
			"2026-10-24T12:00:00Z", []string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"Berlin daily 02:30, asked in the second pass of 02:30", []string{"kdelay-schedule", "0 30 2 * * *", "kdelay-time-zone", "Europe/Berlin"},
			"2026-10-25T01:15:00Z", []string{"2026-10-26T01:30:00Z"}},
		{"Berlin every minute of 02:00-02:59, spring forward: one, at the jump", []string{"kdelay-schedule", "0 * 2 * * *", "kdelay-time-zone", "Europe/Berlin"},
			"2026-03-29T00:00:00Z", []string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}},
		{"Berlin hourly, spring forward: the skipped hour has none", []string{"kdelay-schedule", "0 30 * * * *", "kdelay-time-zone", "Europe/Berlin"},
			"2026-03-29T00:00:00Z", []string{"2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z", "2026-03-29T02:30:00Z"}},
		{"Berlin hourly, fall back: the repeated hour has two", []string{"kdelay-schedule", "0 30 * * * *", "kdelay-time-zone", "Europe/Berlin"},
			"2026-10-24T23:45:00Z", []string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z"}},

		// America/New_York: 2026-03-08 02:00 EST becomes 03:00 EDT (07:00Z);
		// 2026-11-01 02:00 EDT becomes 01:00 EST (06:00Z).
		{"New York daily 02:30, spring forward: at the jump, 03:00 EDT", []string{"kdelay-schedule", "30 2 * * *", "kdelay-time-zone", "America/New_York"},
			"2026-03-07T12:00:00Z", []string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"New York daily 01:30, fall back: once, in the first pass (EDT)", []string{"kdelay-schedule", "30 1 * * *", "kdelay-time-zone", "America/New_York"},
			"2026-10-31T12:00:00Z", []string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			from := at(t, tt.from)
			s := parseSchedule(t, from, append([]string{"kdelay-target", "orders"}, tt.headers...)...)
			var got []string
			for range tt.want {
				next := s.Next(from)
				if next.IsZero() {
					got = append(got, "")
					break
				}
				got = append(got, next.UTC().Format(time.RFC3339))
				from = next
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("occurrences %q, want %q", got, tt.want)
			}
		})
	}
}

// TestParseSchedule checks what a schedule record's headers become, and
// that every mistake is refused with a reason that says how to fix it.
func TestParseSchedule(t *testing.T) {
	t.Parallel()
	ts := at(t, "2026-01-10T00:00:00Z")
	t.Run("fields and user headers", func(t *testing.T) {
		t.Parallel()
		s, user, err := kdelay.ParseSchedule(ts, []byte("daily-report"), hs(
			"kdelay-schedule", "0 0 8 * * *", "source", "cli", "kdelay-time-zone", "Europe/Berlin", "kdelay-target", "reports",
			"kdelay-until", "2026-12-31T00:00:00Z", "kdelay-count", "3", "kdelay-missed", "skip"), kdelay.Rules{})
		if err != nil {
			t.Fatal(err)
		}
		if s.ID != "daily-report" || s.Target != "reports" || s.Zone.String() != "Europe/Berlin" || s.Count != 3 ||
			s.Missed != kdelay.MissedSkip || !s.Until.Equal(at(t, "2026-12-31T00:00:00Z")) || !s.Start.Equal(ts) {
			t.Errorf("got %+v", s)
		}
		if len(user) != 1 || user[0].Key != "source" {
			t.Errorf("user headers %v, want [source=cli]", user)
		}
	})
	t.Run("defaults: UTC, no end, latest missed", func(t *testing.T) {
		t.Parallel()
		s := parseSchedule(t, ts, "kdelay-schedule", "@daily", "kdelay-target", "reports")
		if s.Zone != time.UTC || !s.Until.IsZero() || s.Count != 0 || s.Missed != kdelay.MissedLatest {
			t.Errorf("got %+v", s)
		}
	})
	t.Run("fields build the headers they are parsed from", func(t *testing.T) {
		t.Parallel()
		f := kdelay.ScheduleFields{Spec: "@every 1m", TimeZone: "Europe/Berlin", Target: "reports", Count: "2"}
		s, _, err := kdelay.ParseSchedule(ts, []byte("x"), f.Headers(), kdelay.Rules{})
		if err != nil || s.Spec != f.Spec || s.Count != 2 || s.Target != "reports" {
			t.Errorf("ParseSchedule(%v) = %+v, %v", f.Headers(), s, err)
		}
	})
	t.Run("a schedule's fields give it again", func(t *testing.T) {
		t.Parallel()
		for _, kv := range [][]string{
			{"kdelay-schedule", "0 0 8 * * *", "kdelay-time-zone", "Europe/Berlin", "kdelay-target", "reports",
				"kdelay-until", "2026-12-31T00:00:00.123456789Z", "kdelay-count", "3", "kdelay-missed", "skip"},
			{"kdelay-schedule", "@every 90s", "kdelay-target", "reports"},
		} {
			want := parseSchedule(t, ts, kv...)
			f := want.Fields()
			got, _, err := kdelay.ParseSchedule(ts, []byte("s"), f.Headers(), kdelay.Rules{})
			if err != nil || got.Spec != want.Spec || got.Zone.String() != want.Zone.String() || got.Target != want.Target ||
				!got.Until.Equal(want.Until) || got.Count != want.Count || got.Missed != want.Missed || !got.Next(ts).Equal(want.Next(ts)) {
				t.Errorf("from %v: fields %+v parse to %+v, %v; want %+v", kv, f, got, err, want)
			}
		}
	})
	t.Run("an occurrence's id names the schedule and the time in UTC", func(t *testing.T) {
		t.Parallel()
		berlin, _ := time.LoadLocation("Europe/Berlin")
		if got := kdelay.OccurrenceID("daily", time.Date(2026, 3, 29, 3, 0, 0, 0, berlin)); got != "daily@2026-03-29T01:00:00Z" {
			t.Errorf("OccurrenceID = %q, want daily@2026-03-29T01:00:00Z", got)
		}
	})

	bad := []struct {
		name    string
		key     string
		headers []string
		reason  string
	}{
		{"no key", "", []string{"kdelay-schedule", "@daily", "kdelay-target", "t"}, "set the key to the schedule's id"},
		{"NUL key", "\x00x", []string{"kdelay-schedule", "@daily", "kdelay-target", "t"}, "NUL byte"},
		{"no spec", "s", []string{"kdelay-target", "t"}, "kdelay-schedule is missing; set it to a cron expression"},
		{"no target", "s", []string{"kdelay-schedule", "@daily"}, "kdelay-target is missing"},
		{"target is kdelay's schedules topic", "s", []string{"kdelay-schedule", "@daily", "kdelay-target", "kdelay.schedules"}, "kdelay's own topic"},
		{"bad cron", "s", []string{"kdelay-schedule", "0 61 * * * *", "kdelay-target", "t"}, "write a cron expression with seconds such as '0 30 2 * * *'"},
		{"seven fields", "s", []string{"kdelay-schedule", "0 0 0 * * * 2026", "kdelay-target", "t"}, "five fields without seconds"},
		{"time zone in the expression", "s", []string{"kdelay-schedule", "CRON_TZ=Europe/Berlin 0 30 2 * * *", "kdelay-target", "t"}, "set it in header kdelay-time-zone instead"},
		{"every without a unit", "s", []string{"kdelay-schedule", "@every 90", "kdelay-target", "t"}, "not a Go duration such as 90s"},
		{"every below a second", "s", []string{"kdelay-schedule", "@every 500ms", "kdelay-target", "t"}, "whole seconds, at least 1s"},
		{"never occurs", "s", []string{"kdelay-schedule", "0 0 0 30 2 *", "kdelay-target", "t"}, "30 Feb does not exist"},
		{"unknown zone", "s", []string{"kdelay-schedule", "@daily", "kdelay-time-zone", "Europe/Berlim", "kdelay-target", "t"}, "not an IANA time zone such as Europe/Berlin"},
		{"Local zone", "s", []string{"kdelay-schedule", "@daily", "kdelay-time-zone", "Local", "kdelay-target", "t"}, "name one such as Europe/Berlin, or leave the header out for UTC"},
		{"until not a time", "s", []string{"kdelay-schedule", "@daily", "kdelay-target", "t", "kdelay-until", "tomorrow"}, "kdelay-until \"tomorrow\" is neither unix epoch milliseconds nor RFC 3339"},
		{"until before the first", "s", []string{"kdelay-schedule", "@daily", "kdelay-target", "t", "kdelay-until", "2026-01-10T12:00:00Z"}, "before the first occurrence"},
		{"count of zero", "s", []string{"kdelay-schedule", "@daily", "kdelay-target", "t", "kdelay-count", "0"}, "not a whole number of 1 or more"},
		{"missed unknown", "s", []string{"kdelay-schedule", "@daily", "kdelay-target", "t", "kdelay-missed", "all"}, "neither latest nor skip"},
		{"a routing header", "s", []string{"kdelay-schedule", "@daily", "kdelay-target", "t", "kdelay-id", "x"}, "kdelay sets the id and due time of each occurrence itself"},
		{"a header twice", "s", []string{"kdelay-schedule", "@daily", "kdelay-schedule", "@hourly", "kdelay-target", "t"}, "appears 2 times; set it once"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := kdelay.ParseSchedule(ts, []byte(c.key), hs(c.headers...), kdelay.Rules{})
			if err == nil || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("ParseSchedule: %v, want an error containing %q", err, c.reason)
			}
		})
	}
}

// TestScheduleLast checks the latest of the occurrences missed between an
// occurrence and a later time, for each kind of spec.
func TestScheduleLast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, spec, from, before, want string
	}{
		{"every second, a day later", "* * * * * *", "2026-01-10T00:00:01Z", "2026-01-11T00:00:00.5Z", "2026-01-11T00:00:00Z"},
		{"daily, a week later", "0 30 2 * * *", "2026-01-10T02:30:00Z", "2026-01-17T02:30:00Z", "2026-01-16T02:30:00Z"},
		{"yearly, three years later", "@yearly", "2027-01-01T00:00:00Z", "2029-06-01T00:00:00Z", "2029-01-01T00:00:00Z"},
		{"none after from", "@daily", "2026-01-11T00:00:00Z", "2026-01-11T12:00:00Z", "2026-01-11T00:00:00Z"},
		{"@every, exactly on one: the one before", "@every 90s", "2026-01-10T00:01:30Z", "2026-01-10T00:06:00Z", "2026-01-10T00:04:30Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := parseSchedule(t, at(t, "2026-01-10T00:00:00Z"), "kdelay-target", "t", "kdelay-schedule", tt.spec)
			if got := s.Last(at(t, tt.from), at(t, tt.before)); !got.Equal(at(t, tt.want)) {
				t.Errorf("Last(%s, %s) = %s, want %s", tt.from, tt.before, got.UTC().Format(time.RFC3339), tt.want)
			}
		})
	}
}

// TestScheduleAfter checks the first occurrence after a time, counted
// from the schedule's start.
func TestScheduleAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, spec, now, want string
	}{
		{"@every keeps its phase from the start", "@every 90s", "2026-01-10T00:05:00Z", "2026-01-10T00:06:10Z"},
		{"@every before its first", "@every 90s", "2026-01-10T00:00:11Z", "2026-01-10T00:01:40Z"},
		{"@every exactly on one: the next", "@every 90s", "2026-01-10T00:01:40Z", "2026-01-10T00:03:10Z"},
		{"cron", "0 30 2 * * *", "2026-01-12T03:00:00Z", "2026-01-13T02:30:00Z"},
		{"past until: none", "@daily", "2026-02-01T00:00:00Z", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := parseSchedule(t, at(t, "2026-01-10T00:00:10Z"), "kdelay-target", "t", "kdelay-schedule", tt.spec, "kdelay-until", "2026-01-20T00:00:00Z")
			var want time.Time
			if tt.want != "" {
				want = at(t, tt.want)
			}
			if got := s.After(at(t, tt.now)); !got.Equal(want) {
				t.Errorf("After(%s) = %s, want %s", tt.now, got.UTC().Format(time.RFC3339), tt.want)
			}
		})
	}
}

func TestScheduleHas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec, time string
		want       bool
	}{
		{"0 30 2 * * *", "2026-01-11T02:30:00Z", true},
		{"0 30 2 * * *", "2026-01-11T02:31:00Z", false},
		{"0 30 2 * * *", "2026-01-09T02:30:00Z", false}, // before Start
		{"@every 90s", "2026-01-10T00:04:30Z", true},
		{"@every 90s", "2026-01-10T00:04:00Z", false},
	}
	for _, tt := range tests {
		s := parseSchedule(t, at(t, "2026-01-10T00:00:00Z"), "kdelay-target", "t", "kdelay-schedule", tt.spec)
		if got := s.Has(at(t, tt.time)); got != tt.want {
			t.Errorf("%q Has(%s) = %v, want %v", tt.spec, tt.time, got, tt.want)
		}
	}
}
