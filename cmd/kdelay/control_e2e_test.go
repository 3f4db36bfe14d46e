package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/kafkatest"
)

// TestCommandsEndToEnd needs the server side of commands: it runs `kdelay
// serve`, sends records with `kdelay send`, changes them with `kdelay
// cancel`, `reschedule` and `run-now`, and checks what reaches the target.
// It skips itself while serve does not create the control topic.
func TestCommandsEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.serve()
	if !topicExists(t, s.brokers, e.topics().Control()) {
		t.Skipf("kdelay serve did not create %s: the server side of commands is not built in", e.topics().Control())
	}
	target := s.collect(t, e.target)
	run := func(args ...string) string {
		t.Helper()
		args = append(args, "--brokers", s.brokers, "--topic-prefix", e.prefix)
		code, out, _ := runWithin(t, 20*time.Second, e.command(args...))
		if code != 0 {
			t.Fatalf("kdelay %s: exit %d, printed:\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	send := func(id, delay string) (sent time.Time) {
		sent = time.Now()
		run("send", "--target", e.target, "--delay", delay, "--id", id, id)
		return sent
	}
	// Each command right after its record: the record is then still
	// pending, wherever kdelay has it.
	oldDue, newDue := map[string]time.Time{}, map[string]time.Time{}
	oldDue["cancelled"] = send("cancelled", "4s").Add(4 * time.Second)
	run("cancel", "cancelled")
	oldDue["earlier"] = send("earlier", "8s").Add(8 * time.Second)
	newDue["earlier"] = printedDue(t, run("reschedule", "earlier", "--delay", "1s"))
	oldDue["later"] = send("later", "3s").Add(3 * time.Second)
	newDue["later"] = printedDue(t, run("reschedule", "later", "--delay", "6s"))
	oldDue["hurried"] = send("hurried", "8s").Add(8 * time.Second)
	newDue["hurried"] = printedDue(t, run("run-now", "hurried"))

	// Read until every old and new due time has passed by 2s, to catch a
	// record delivered at the old time too.
	var end time.Time
	for _, d := range oldDue {
		end = maxTime(end, d.Add(2*time.Second))
	}
	for _, d := range newDue {
		end = maxTime(end, d.Add(2*time.Second))
	}
	got := target.Until(time.Until(end)+10*time.Second, func([]kafkatest.Arrival) bool { return time.Now().After(end) })
	byValue := map[string][]kafkatest.Arrival{}
	for _, a := range got {
		byValue[string(a.Value)] = append(byValue[string(a.Value)], a)
	}
	if n := len(byValue["cancelled"]); n != 0 {
		t.Errorf("cancelled: delivered %d times, want never", n)
	}
	for id, due := range newDue {
		as := byValue[id]
		if len(as) != 1 {
			t.Errorf("%s: delivered %d times, want once, at %s (it was due at %s)", id, len(as), due, oldDue[id])
			continue
		}
		at := as[0].Timestamp // when kdelay produced it
		switch {
		case at.Before(due):
			t.Errorf("%s: delivered at %s, %s before its new due time %s", id, at, due.Sub(at), due)
		case at.Sub(due) > 2*time.Second:
			t.Errorf("%s: delivered at %s, %s after its new due time %s, want within 2s", id, at, at.Sub(due), due)
		default:
			t.Logf("%s: late by %s against its new due time", id, at.Sub(due))
		}
	}
}

// printedDue is the new due time a reschedule or run-now printed.
var printedDueTime = regexp.MustCompile(`kdelay will deliver \S+ (?:at|now \() ?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)`)

func printedDue(t *testing.T, out string) time.Time {
	t.Helper()
	m := printedDueTime.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("printed %q, want the new due time", out)
	}
	due, err := time.Parse(time.RFC3339Nano, m[1])
	if err != nil {
		t.Fatal(err)
	}
	return due
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// topicExists asks the brokers whether topic exists.
func topicExists(t *testing.T, brokers, topic string) bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatalf("list topic %s: %v", topic, err)
	}
	d, ok := ts[topic]
	return ok && d.Err == nil
}
