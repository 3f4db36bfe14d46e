package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/fleet"
)

// TestStatus runs `kdelay status` against a running serve, as an operator
// would from another machine, and checks that it counts as pending exactly
// the records sent and not yet delivered, in the level where they wait,
// with when the oldest is due and the group's members.
func TestStatus(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.levels = []string{"1s", "1h"}
	s := e.serve()
	arrivals := s.collect(t, e.target)
	sent := time.Now()
	for i := range 3 {
		e.run(t, "send", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--target", e.target, "--delay", "1h", fmt.Sprint("later-", i))
	}
	for i := range 2 {
		e.run(t, "send", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--target", e.target, "--delay", "0", fmt.Sprint("now-", i))
	}
	if got := arrivals.Until(20*time.Second, all([]string{"now-0", "now-1"})); len(got) != 2 {
		t.Fatalf("the 2 records due now: %d arrived, want 2", len(got))
	}
	statusArgs := []string{"status", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--group", e.group, "--levels", "1s,1h"}
	// Its first occurrence an hour ahead: nothing written into the ingress
	// during the test.
	e.run(t, "schedule", "create", "hourly", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--cron", "@every 1h", "--target", e.target, "tick")
	created := time.Now()

	var st map[string]fleet.LevelStatus
	var sched fleet.ScheduleStatus
	// The ingress commits within commit-interval (1s) of routing the
	// records; the scheduler joins its group once the forwarder is ready.
	settled := eventually(20*time.Second, func() bool {
		st, sched = e.statusJSON(t, statusArgs)
		return st["1h"].Pending == 3 && st["ingress"].Pending == 0 && st["1s"].Pending == 0 && sched.State == "Stable"
	})
	if !settled {
		t.Fatalf("status: %+v, %+v\nwant 3 pending in 1h (sent with a 1h delay), 0 in the ingress and 1s (the 2 due now were delivered), the schedulers' group Stable",
			st, sched)
	}

	t.Run("every stage has its partitions and one member", func(t *testing.T) {
		for _, name := range []string{"ingress", "1s", "1h"} {
			if l := st[name]; l.Partitions != 2 || l.Members != 1 || l.State != "Stable" || !l.Configured || l.Problem != "" {
				t.Errorf("%s: %+v, want 2 partitions, 1 member of a Stable group, configured, no problem", name, l)
			}
		}
		if len(st) != 3 {
			t.Errorf("status has %d levels, want 3 (ingress, 1s, 1h): %+v", len(st), st)
		}
	})
	t.Run("the oldest due time is the head's timestamp plus the level", func(t *testing.T) {
		l := st["1h"]
		// The hop is stamped when kdelay produced it: after the send, within seconds.
		if l.OldestDue == nil || l.OldestDue.Before(sent.Add(time.Hour).Truncate(time.Millisecond)) || l.OldestDue.After(sent.Add(time.Hour+20*time.Second)) {
			t.Errorf("1h oldest due %v, want between %s and 20s later", l.OldestDue, sent.Add(time.Hour))
		}
		if l.HeadLateness == nil || *l.HeadLateness > -3500 || *l.HeadLateness < -3600 {
			t.Errorf("1h head lateness %v s, want about -3600 (due in an hour)", l.HeadLateness)
		}
		if st["ingress"].OldestDue != nil {
			t.Errorf("ingress oldest due %v with nothing pending, want none", st["ingress"].OldestDue)
		}
	})
	t.Run("schedules: in force, the next occurrence, none overdue, one scheduler", func(t *testing.T) {
		first := created.Add(time.Hour)
		if sched.Schedules != 1 || sched.Refused != 0 || sched.Overdue != 0 || sched.Members != 1 || sched.Problem != "" ||
			sched.NextID != "hourly" || sched.Next == nil || sched.Next.Before(first.Add(-20*time.Second)) || sched.Next.After(first) {
			t.Errorf("schedules %+v, want 1 in force, none refused or overdue, 1 member, next hourly's first, an hour after %s", sched, created)
		}
	})
	t.Run("the table shows the same", func(t *testing.T) {
		out := e.run(t, statusArgs...)
		levels, schedules, _ := strings.Cut(strings.TrimSpace(out), "\n\n")
		lines := strings.Split(levels, "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[0], "LEVEL ") || !strings.Contains(lines[0], "PENDING") {
			t.Fatalf("status printed:\n%s\nwant a header and 3 rows, then the schedules", out)
		}
		if f := strings.Fields(lines[3]); f[0] != "1h" || f[2] != "2" || f[3] != "3" || !strings.HasPrefix(f[5], "-59m") || f[6] != "1" {
			t.Errorf("status row of 1h: %q, want 1h with 2 partitions, 3 pending, due in about 59m, 1 member", lines[3])
		}
		lines = strings.Split(schedules, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "SCHEDULES ") {
			t.Fatalf("status printed:\n%s\nwant the schedules' header and row after the levels", out)
		}
		if f := strings.Fields(lines[1]); len(f) < 7 || f[0] != "1" || f[1] != "0" || f[3] != "hourly" || f[4] != "0" || f[5] != "1" || f[6] != "Stable" {
			t.Errorf("status row of the schedules: %q, want 1 in force, 0 refused, next of hourly, 0 overdue, 1 Stable member", lines[1])
		}
	})
}

// statusJSON runs status --json and returns its objects by level, and its
// last, the schedules'.
func (e *e2e) statusJSON(t *testing.T, args []string) (map[string]fleet.LevelStatus, fleet.ScheduleStatus) {
	t.Helper()
	out := e.run(t, append(args, "--json")...)
	st := map[string]fleet.LevelStatus{}
	var sched map[string]fleet.ScheduleStatus
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), `{"schedules":`) {
			if err := json.Unmarshal(sc.Bytes(), &sched); err != nil {
				t.Fatalf("status --json printed %q: %v", sc.Text(), err)
			}
			continue
		}
		var l fleet.LevelStatus
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("status --json printed %q: %v", sc.Text(), err)
		}
		st[l.Level] = l
	}
	if sched == nil {
		t.Fatalf("status --json printed no schedules object:\n%s", out)
	}
	return st, sched["schedules"]
}

// run runs the kdelay binary to its end and returns what it printed on
// standard output; it fails the test if the command fails.
func (e *e2e) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := e.command(args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kdelay %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
