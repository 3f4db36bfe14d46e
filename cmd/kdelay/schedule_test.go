package main

import (
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// TestScheduleCreateErrors checks that create refuses, before connecting,
// what kdelay would refuse, saying how to fix it.
func TestScheduleCreateErrors(t *testing.T) {
	t.Parallel()
	ok := kdelay.ScheduleFields{Spec: "@daily", Target: "reports"}
	with := func(change func(*scheduleFlags)) scheduleFlags {
		f := scheduleFlags{fields: ok}
		change(&f)
		return f
	}
	tests := []struct {
		name  string
		flags scheduleFlags
		want  string
	}{
		{"no cron", with(func(f *scheduleFlags) { f.fields.Spec = "" }), "--cron is required"},
		{"no target", with(func(f *scheduleFlags) { f.fields.Target = "" }), "--target is required"},
		{"a header without =", with(func(f *scheduleFlags) { f.headers = []string{"source"} }), `--header "source" is not name=value`},
		{"a cron kdelay refuses", with(func(f *scheduleFlags) { f.fields.Spec = "0 0 25 * * *" }), "kdelay would refuse this schedule: kdelay-schedule"},
		{"a zone kdelay does not know", with(func(f *scheduleFlags) { f.fields.TimeZone = "Berlin" }), "not an IANA time zone"},
		{"kdelay's own topic", with(func(f *scheduleFlags) { f.fields.Target = "kdelay.ingress" }), "kdelay's own topic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := tt.flags.record(kdelay.Rules{}, "daily", "v", time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("record: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("a good one is the record kdelay reads", func(t *testing.T) {
		t.Parallel()
		r, s, err := with(func(f *scheduleFlags) { f.headers = []string{"source=cli"} }).record(kdelay.Rules{}, "daily", "v", time.Now())
		if err != nil || r.Topic != "kdelay.schedules" || string(r.Key) != "daily" || string(r.Value) != "v" || s.Target != "reports" || len(r.Headers) != 3 {
			t.Errorf("record = %+v, %+v, %v; want daily on kdelay.schedules with source, kdelay-schedule and kdelay-target", r, s, err)
		}
	})
}

// TestSchedulerCompacts: serve's scheduler compacts the schedules topic on
// the embedded broker, which does not (schedule.Config.Compact), and leaves
// it to the brokers otherwise.
func TestSchedulerCompacts(t *testing.T) {
	t.Parallel()
	embedded := server{cfg: embeddedConfig(t)}
	if !embedded.schedulerConfig([]string{"127.0.0.1:9092"}).Compact {
		t.Error("on the embedded broker the scheduler does not compact the schedules topic; want it to")
	}
	withBrokers := server{cfg: embeddedConfig(t, "KDELAY_BROKERS=127.0.0.1:9092")}
	if withBrokers.schedulerConfig([]string{"127.0.0.1:9092"}).Compact {
		t.Error("with brokers the scheduler compacts the schedules topic; want the brokers to")
	}
}

// TestSchedulerLookahead: serve writes occurrences schedule-lookahead before
// their time, and no earlier than max-delay allows: an occurrence is a delay
// of the lookahead.
func TestSchedulerLookahead(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		want time.Duration
	}{
		{nil, time.Minute},
		{[]string{"KDELAY_SCHEDULE_LOOKAHEAD=30s"}, 30 * time.Second},
		{[]string{"KDELAY_MAX_DELAY=20s"}, 20 * time.Second},
	} {
		s := server{cfg: embeddedConfig(t, c.env...)}
		if got := s.schedulerConfig([]string{"127.0.0.1:9092"}).Lookahead; got != c.want {
			t.Errorf("with %v the scheduler writes occurrences %s ahead; want %s", c.env, got, c.want)
		}
	}
}
