package main

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestScheduleEndToEnd runs `kdelay serve`, writes a schedule with kcat as a
// producer in any language would, and reads its occurrences on the target:
// each once, at its time, never before. Then `kdelay schedule list`, `show`
// and `delete`, after which no occurrence arrives.
func TestScheduleEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.serve()
	target := s.collect(t, e.target)
	run := func(args ...string) string {
		t.Helper()
		args = append(args, "--brokers", s.brokers, "--topic-prefix", e.prefix)
		code, out, _ := runWithin(t, 40*time.Second, e.command(args...))
		if code != 0 {
			t.Fatalf("kdelay %s: exit %d, printed:\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}

	// librdkafka's default partitioner is not Kafka's: murmur2 puts the
	// schedule where kdelay, and the Java client, look for it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kcat := exec.CommandContext(ctx, "kcat", "-P", "-b", s.brokers, "-t", e.topics().Schedules(), "-X", "partitioner=murmur2_random",
		"-k", "e2e", "-H", kdelay.HeaderSchedule+"=*/2 * * * * *", "-H", kdelay.HeaderTarget+"="+e.target, "-H", "source=kcat")
	kcat.Stdin = strings.NewReader("tick\n")
	if out, err := kcat.CombinedOutput(); err != nil {
		t.Fatalf("kcat: %v\n%s", err, out)
	}

	got := target.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= 3 })
	if len(got) < 3 {
		t.Fatalf("%d occurrences arrived in 30s, want 3 (every 2s)", len(got))
	}
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		due := kafkatest.DeliverAt(t, a.Record)
		if !strings.HasPrefix(id, "e2e@") || kdelay.OccurrenceID("e2e", due) != id || string(a.Value) != "tick" || headerOf(a.Record, "source") != "kcat" {
			t.Errorf("delivered id %q value %q source %q, want e2e@<its due time>, tick, kcat", id, a.Value, headerOf(a.Record, "source"))
		}
		if at := a.Timestamp; at.Before(due) || at.Sub(due) > 2*time.Second {
			t.Errorf("%s delivered at %s, want at its time %s, at most 2s late", id, at, due)
		}
	}

	// serve counts the scheduler's index against max-buffered-bytes: the
	// records' budget is the default less what the index holds.
	m := regexp.MustCompile(`admin_listening addr=(\S+)`).FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("serve did not log admin_listening with its address:\n%s", s.out)
	}
	_, page := get(t, "http://"+m[1]+"/metrics")
	index, budget := metric(page, "kdelay_schedule_index_bytes"), metric(page, "kdelay_buffer_budget_bytes")
	if index <= 0 || budget != float64(forwarder.DefaultMaxBufferedBytes)-index {
		t.Errorf("kdelay_schedule_index_bytes %v, kdelay_buffer_budget_bytes %v; want an index, and max-buffered-bytes %d less it",
			index, budget, forwarder.DefaultMaxBufferedBytes)
	}

	if out := run("schedule", "list"); !strings.Contains(out, "e2e") || !strings.Contains(out, "*/2 * * * * *") {
		t.Errorf("schedule list printed:\n%s\nwant e2e with its cron", out)
	}
	if out := run("schedule", "show", "e2e"); !strings.Contains(out, "target:       "+e.target) || !strings.Contains(out, "next occurrences (UTC):") {
		t.Errorf("schedule show printed:\n%s\nwant its target and next occurrences", out)
	}
	run("schedule", "delete", "e2e")
	deleted := time.Now()
	// Occurrences a minute ahead were written; the delete cancels them.
	after := target.Until(6*time.Second, func([]kafkatest.Arrival) bool { return false })
	for _, a := range after {
		if due := kafkatest.DeliverAt(t, a.Record); due.After(deleted.Add(time.Second)) {
			t.Errorf("occurrence due %s delivered, %s after the delete", due, due.Sub(deleted))
		}
	}
	if out := run("schedule", "list"); strings.Contains(out, "e2e") {
		t.Errorf("schedule list after the delete printed:\n%s\nwant no e2e", out)
	}
}

// metric is the value of the unlabelled metric name on a /metrics page, -1
// when absent.
func metric(page, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(page)
	if m == nil {
		return -1
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return -1
	}
	return n
}
