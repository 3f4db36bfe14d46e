package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// sent is a record written to the ingress with kcat, and what kdelay must do
// with it.
type sent struct {
	value   string
	key     string
	headers []string                     // kcat -H name=value arguments, in order
	user    []string                     // the headers it is delivered with, in order
	due     func(ts time.Time) time.Time // from the ingress timestamp; nil for a bad record
	bad     string                       // for a bad record: what its kdelay-error mentions
}

// traffic is what TestServe sends: delays from 0 to 6s, including
// remainders below the smallest level (300ms) and between levels (1.4s), as
// milliseconds and as Go durations; absolute times as epoch milliseconds and
// RFC 3339, one in the past; and records kdelay must dead-letter.
func traffic(target, ingress string, now time.Time) []sent {
	var rs []sent
	for _, delay := range []string{"0", "300", "999", "1000", "1.4s", "1500", "2000", "2300", "3s", "3700", "4.2s", "5000", "5300", "6s"} {
		d, _ := kdelay.ParseDelay(delay)
		for _, key := range []string{"a", "b"} {
			rs = append(rs, good("delay-"+delay+"-"+key, key, target, kdelay.HeaderDelay+"="+delay,
				func(ts time.Time) time.Time { return kdelay.CeilMillis(ts.Add(d)) }))
		}
	}
	for name, at := range map[string]time.Time{
		"at-ms": now.Add(2500 * time.Millisecond), "at-rfc3339": now.Add(3300 * time.Millisecond), "at-past": now.Add(-time.Hour),
		"at-rfc3339-lower-case": now.Add(2800 * time.Millisecond),
	} {
		at = at.Truncate(time.Millisecond)
		text := strconv.FormatInt(at.UnixMilli(), 10)
		switch name {
		case "at-rfc3339":
			text = at.UTC().Format(time.RFC3339Nano)
		case "at-rfc3339-lower-case": // RFC 3339 allows t and z
			text = strings.ToLower(at.UTC().Format(time.RFC3339Nano))
		}
		rs = append(rs, good(name, "c", target, kdelay.HeaderDeliverAt+"="+text, func(time.Time) time.Time { return at }))
	}
	to, soon := kdelay.HeaderTarget+"="+target, kdelay.HeaderDelay+"=1000"
	return append(rs,
		sent{value: "bad-no-target", headers: []string{soon}, bad: kdelay.HeaderTarget},
		sent{value: "bad-own-target", headers: []string{kdelay.HeaderTarget + "=" + ingress, soon}, bad: kdelay.HeaderTarget},
		sent{value: "bad-both", headers: []string{to, soon, kdelay.HeaderDeliverAt + "=" + strconv.FormatInt(now.UnixMilli(), 10)}, bad: kdelay.HeaderDeliverAt},
		sent{value: "bad-neither", headers: []string{to}, bad: kdelay.HeaderDelay},
		sent{value: "bad-delay", headers: []string{to, kdelay.HeaderDelay + "=soon"}, bad: kdelay.HeaderDelay},
		sent{value: "bad-negative", headers: []string{to, kdelay.HeaderDelay + "=-5s"}, bad: kdelay.HeaderDelay},
		sent{value: "bad-deliver-at", headers: []string{to, kdelay.HeaderDeliverAt + "=tomorrow"}, bad: kdelay.HeaderDeliverAt},
		sent{value: "bad-deliver-at-negative", headers: []string{to, kdelay.HeaderDeliverAt + "=-1"}, bad: "is negative"},
		// An hour from now written with the offset +24:00, which RFC 3339
		// does not allow: read as Go reads it, it is 23 hours ago.
		sent{value: "bad-offset-24h", headers: []string{to, kdelay.HeaderDeliverAt + "=" +
			now.Add(time.Hour).In(time.FixedZone("", 24*3600)).Format("2006-01-02T15:04:05") + "+24:00"}, bad: "offset 24:00 is out of range"},
		sent{value: "bad-empty-id", headers: []string{to, soon, kdelay.HeaderID + "="}, bad: "kdelay-id is empty"},
	)
}

// good is a record to deliver, with user headers around the routing ones:
// kdelay must drop only the routing ones and keep the rest in order.
func good(value, key, target, when string, due func(time.Time) time.Time) sent {
	user := []string{"trace=" + value, "dup=1", "dup=2"}
	return sent{value: value, key: key, due: due, user: user,
		headers: []string{user[0], kdelay.HeaderTarget + "=" + target, user[1], when, user[2]}}
}

// produce writes every record to topic with its own kcat, a few at a time.
func produce(t *testing.T, brokers, topic string, rs []sent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var g errgroup.Group
	g.SetLimit(8)
	for _, r := range rs {
		g.Go(func() error {
			args := []string{"-P", "-b", brokers, "-t", topic, "-k", r.key, "-X", "message.timeout.ms=10000"}
			for _, h := range r.headers {
				args = append(args, "-H", h)
			}
			cmd := exec.CommandContext(ctx, "kcat", args...)
			cmd.Stdin = strings.NewReader(r.value + "\n")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("kcat %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.serve()
	rs := traffic(e.target, e.topics().Ingress(), time.Now())
	produce(t, s.brokers, e.topics().Ingress(), rs)

	var goodValues, badValues []string
	for _, r := range rs {
		if r.due != nil {
			goodValues = append(goodValues, r.value)
		} else {
			badValues = append(badValues, r.value)
		}
	}
	// The ingress records give each record's timestamp, from which its due
	// time is counted, and its place, from which its id is made.
	src := map[string]*kgo.Record{}
	for _, a := range s.collect(t, e.topics().Ingress()).Until(20*time.Second, all(append(goodValues, badValues...))) {
		src[string(a.Value)] = a.Record
	}
	delivered := s.collect(t, e.target).Until(30*time.Second, settled(all(goodValues), time.Second))
	byValue := map[string][]kafkatest.Arrival{}
	for _, a := range delivered {
		byValue[string(a.Value)] = append(byValue[string(a.Value)], a)
	}

	t.Run("every record delivered once, with its id", func(t *testing.T) {
		ids := map[string]int{}
		for _, a := range delivered {
			ids[headerOf(a.Record, kdelay.HeaderID)]++
		}
		for _, r := range rs {
			got, in := byValue[r.value], src[r.value]
			switch {
			case in == nil:
				t.Errorf("record %s not found on the ingress", r.value)
			case r.due == nil && len(got) > 0:
				t.Errorf("bad record %s delivered to the target", r.value)
			case r.due != nil && len(got) != 1:
				t.Errorf("record %s arrived %d times, want once", r.value, len(got))
			case r.due != nil && ids[place(in)] != 1:
				t.Errorf("record %s: %d deliveries have id %s (its ingress place), want 1; it came with id %q",
					r.value, ids[place(in)], place(in), headerOf(got[0].Record, kdelay.HeaderID))
			}
		}
	})

	t.Run("never before kdelay-deliver-at, which is the due time", func(t *testing.T) {
		var lateness []time.Duration
		for _, r := range rs {
			if r.due == nil || len(byValue[r.value]) == 0 || src[r.value] == nil {
				continue
			}
			a, due := byValue[r.value][0], r.due(src[r.value].Timestamp)
			at, err := strconv.ParseInt(headerOf(a.Record, kdelay.HeaderDeliverAt), 10, 64)
			switch {
			case err != nil || at != due.UnixMilli():
				t.Errorf("record %s: %s = %q, want %d (%s)", r.value, kdelay.HeaderDeliverAt, headerOf(a.Record, kdelay.HeaderDeliverAt), due.UnixMilli(), due)
			case a.Timestamp.Before(due) || a.At.Before(due):
				t.Errorf("record %s due %s was produced at %s and read at %s: %s early", r.value, due, a.Timestamp, a.At, due.Sub(a.Timestamp))
			}
			if r.value != "at-past" {
				lateness = append(lateness, a.At.Sub(due))
				if l := a.At.Sub(due); l > 200*time.Millisecond {
					t.Logf("record %s arrived %s late", r.value, l)
				}
			}
		}
		slices.Sort(lateness)
		if len(lateness) > 0 {
			t.Logf("lateness of %d records: median %s, max %s", len(lateness), lateness[len(lateness)/2], lateness[len(lateness)-1])
			// Generous for a loaded CI machine: catches a record that waits a
			// level too long, not a slow scheduler.
			if worst := lateness[len(lateness)-1]; worst > 2*time.Second {
				t.Errorf("a record arrived %s late, want under 2s", worst)
			}
		}
	})

	t.Run("key and user headers kept in order", func(t *testing.T) {
		for _, r := range rs {
			if r.due == nil || len(byValue[r.value]) == 0 {
				continue
			}
			a := byValue[r.value][0]
			var user []string
			for _, h := range a.Headers {
				if h.Key != kdelay.HeaderID && h.Key != kdelay.HeaderDeliverAt {
					user = append(user, h.Key+"="+string(h.Value))
				}
			}
			if string(a.Key) != r.key || !slices.Equal(user, r.user) {
				t.Errorf("record %s arrived with key %q and headers %q, want key %q and %q", r.value, a.Key, user, r.key, r.user)
			}
		}
	})

	t.Run("bad records dead-lettered with the reason", func(t *testing.T) {
		dlq := map[string]*kgo.Record{}
		for _, a := range s.collect(t, e.topics().DLQ()).Until(20*time.Second, all(badValues)) {
			dlq[string(a.Value)] = a.Record
		}
		for _, r := range rs {
			d := dlq[r.value]
			switch {
			case r.due != nil && d != nil:
				t.Errorf("good record %s dead-lettered: %s", r.value, headerOf(d, kdelay.HeaderError))
			case r.due != nil:
			case d == nil:
				t.Errorf("bad record %s is not in %s", r.value, e.topics().DLQ())
			case !strings.Contains(headerOf(d, kdelay.HeaderError), r.bad):
				t.Errorf("bad record %s: %s = %q, want it to name %s", r.value, kdelay.HeaderError, headerOf(d, kdelay.HeaderError), r.bad)
			case src[r.value] != nil && headerOf(d, kdelay.HeaderSource) != place(src[r.value]):
				t.Errorf("bad record %s: %s = %q, want %q", r.value, kdelay.HeaderSource, headerOf(d, kdelay.HeaderSource), place(src[r.value]))
			}
		}
	})

	t.Run("tail prints every delivery, none early, and stops on SIGINT", func(t *testing.T) {
		out := &output{}
		cmd := e.command("tail", "--brokers", s.brokers, "--from-beginning", e.target)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() }).Stop()
		printed := eventually(20*time.Second, func() bool { return strings.Count(out.String(), "\n") >= len(goodValues) })
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		lines := out.String()
		if !printed || err != nil || strings.Contains(lines, "EARLY") {
			t.Fatalf("tail exited with %v after printing:\n%s\nwant exit 0 after %d lines, none EARLY", err, lines, len(goodValues))
		}
		for _, v := range goodValues {
			if !strings.Contains(lines, `value="`+v+`"`) {
				t.Errorf("tail did not print record %s", v)
			}
		}
	})

	t.Run("SIGTERM stops it cleanly within seconds", func(t *testing.T) {
		code, took := s.stop(t)
		if code != 0 || took > 5*time.Second {
			t.Errorf("exited with %d after %s, want 0 within 5s", code, took)
		}
	})
}

func TestRestart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.serve()
	id, due := e.send(s.brokers, "--target", e.target, "--delay", "4s", "survivor")
	if code, _ := s.stop(t); code != 0 {
		t.Fatalf("first serve exited with %d, want 0", code)
	}

	s = e.serve()
	got := s.collect(t, e.target).Until(20*time.Second, settled(all([]string{"survivor"}), time.Second))
	if len(got) != 1 {
		t.Fatalf("after a restart %d records arrived, want the one sent before it", len(got))
	}
	a := got[0]
	if gotID := headerOf(a.Record, kdelay.HeaderID); gotID != id || a.At.Before(due) {
		t.Errorf("arrived with id %s at %s, want id %s (printed by send) at or after %s", gotID, a.At, id, due)
	}
	if code, _ := s.stop(t); code != 0 {
		t.Errorf("second serve exited with %d, want 0", code)
	}
}

// TestKillKeepsAutoCreatedTopics checks the embedded broker's promise: what
// it acknowledged survives kill -9 of serve, including topics nobody created
// explicitly -- one a producer made by writing to it, and a target kdelay made
// by delivering to it.
func TestKillKeepsAutoCreatedTopics(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if e.cluster != nil {
		t.Skip("kill -9 of serve tests the embedded broker's data dir; this run uses a real cluster")
	}
	s := e.serve()
	produced := kafkatest.Name(t) + ".produced"
	values := []string{"one", "two", "three"}
	var rs []sent
	for _, v := range values {
		rs = append(rs, sent{value: v, key: v})
	}
	produce(t, s.brokers, produced, rs)
	// Written to the ingress as kcat would, not with kdelay send, which
	// has the broker create the target before it writes: here the target
	// must be created by kdelay's delivery.
	produce(t, s.brokers, e.topics().Ingress(), []sent{{value: "delivered",
		headers: []string{kdelay.HeaderTarget + "=" + e.target, kdelay.HeaderDelay + "=1s"}}})
	// Reading them back proves the broker acknowledged and holds them all.
	if got := s.collect(t, produced).Until(20*time.Second, all(values)); len(got) != len(values) {
		t.Fatalf("before the kill %d records were read from %s, want %d", len(got), produced, len(values))
	}
	if got := s.collect(t, e.target).Until(20*time.Second, all([]string{"delivered"})); len(got) != 1 {
		t.Fatalf("before the kill %d records were delivered to %s, want 1", len(got), e.target)
	}
	// Nothing left to redeliver: after the restart the target holds only
	// what the broker kept, not a second delivery made on a new topic.
	e.waitCommitted(s.brokers)
	s.kill(t)

	s = e.serve()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(cl).ListTopics(ctx, produced, e.target)
	if err != nil {
		t.Fatalf("list topics after the restart: %v", err)
	}
	for _, topic := range []string{produced, e.target} {
		// serveArgs runs with --partitions 2: auto-created topics get it.
		if d, ok := listed[topic]; !ok || d.Err != nil || len(d.Partitions) != 2 {
			t.Errorf("after kill -9 and a restart, topic %s is %+v, want it with 2 partitions", topic, d)
		}
	}
	for topic, want := range map[string][]string{produced: values, e.target: {"delivered"}} {
		got := kafkatest.Values(s.collect(t, topic).Until(10*time.Second, settled(all(want), time.Second)))
		for _, v := range want {
			if got[v] != 1 {
				t.Errorf("after kill -9 and a restart, %s holds record %q %d times, want once (it holds %v)", topic, v, got[v], got)
			}
		}
	}
	if code, _ := s.stop(t); code != 0 {
		t.Errorf("serve after the kill exited with %d, want 0", code)
	}
}

var sendLine = regexp.MustCompile(`^id=(\S+) due=(\S+) in=`)

// send runs `kdelay send` against brokers and returns the id and due time
// it printed.
func (e *e2e) send(brokers string, args ...string) (id string, due time.Time) {
	e.t.Helper()
	cmd := e.command(append([]string{"send", "--brokers", brokers, "--topic-prefix", e.prefix}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("kdelay send: %v\n%s", err, out)
	}
	m := sendLine.FindStringSubmatch(string(out))
	if m == nil {
		e.t.Fatalf("kdelay send printed %q, want id=... due=... in=...", out)
	}
	due, err = time.Parse(time.RFC3339Nano, m[2])
	if err != nil {
		e.t.Fatalf("kdelay send printed due=%s: %v", m[2], err)
	}
	return m[1], due
}
