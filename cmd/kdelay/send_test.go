package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

func TestSendRecord(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 8, 0, 0, 123_456_789, time.UTC) // Kafka keeps 123ms of it
	kept := now.Truncate(time.Millisecond)
	tests := []struct {
		name    string
		flags   sendFlags
		due     time.Time
		headers []string
	}{
		{"delay in milliseconds", sendFlags{target: "orders", delay: "1500ms"}, kept.Add(1500 * time.Millisecond),
			[]string{"kdelay-target=orders", "kdelay-delay=1500ms"}},
		{"delay as a Go duration", sendFlags{target: "orders", delay: "1m30s"}, kept.Add(90 * time.Second),
			[]string{"kdelay-target=orders", "kdelay-delay=1m30s"}},
		{"sub-millisecond delay rounds the due time up", sendFlags{target: "orders", delay: "1.5ms"}, kept.Add(2 * time.Millisecond),
			[]string{"kdelay-target=orders", "kdelay-delay=1.5ms"}},
		{"time in epoch milliseconds", sendFlags{target: "orders", at: "1795334400000"}, time.UnixMilli(1795334400000),
			[]string{"kdelay-target=orders", "kdelay-deliver-at=1795334400000"}},
		{"time in RFC 3339", sendFlags{target: "orders", at: "2026-11-22T09:00:00Z"}, time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC),
			[]string{"kdelay-target=orders", "kdelay-deliver-at=2026-11-22T09:00:00Z"}},
		{"user headers first, in order, then id", sendFlags{target: "orders", delay: "0", id: "order-42", idSet: true, headers: []string{"b=2", "a=1=one", "b=3"}}, kept,
			[]string{"b=2", "a=1=one", "b=3", "kdelay-target=orders", "kdelay-delay=0", "kdelay-id=order-42"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, due, err := tt.flags.record(kdelay.Rules{}, "hello", now)
			if err != nil {
				t.Fatalf("record: %v", err)
			}
			var headers []string
			for _, h := range r.Headers {
				headers = append(headers, h.Key+"="+string(h.Value))
			}
			if !due.Equal(tt.due) || !slices.Equal(headers, tt.headers) || !r.Timestamp.Equal(kept) || r.Topic != "kdelay.ingress" {
				t.Errorf("got due %s, headers %q, timestamp %s, topic %s\nwant due %s, headers %q, timestamp %s, topic kdelay.ingress",
					due, headers, r.Timestamp, r.Topic, tt.due, tt.headers, kept)
			}
		})
	}

	t.Run("key only when given", func(t *testing.T) {
		t.Parallel()
		without, _, _ := sendFlags{target: "orders", delay: "1s"}.record(kdelay.Rules{}, "v", now)
		empty, _, _ := sendFlags{target: "orders", delay: "1s", keySet: true}.record(kdelay.Rules{}, "v", now)
		if without.Key != nil || empty.Key == nil {
			t.Errorf("got keys %q and %q, want null without --key and empty with --key ''", without.Key, empty.Key)
		}
	})
}

func TestSendRecordErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		flags sendFlags
		want  string
	}{
		{"no target", sendFlags{delay: "1s"}, "--target is required"},
		{"neither delay nor time", sendFlags{target: "orders"}, "set exactly one of --delay"},
		{"both delay and time", sendFlags{target: "orders", delay: "1s", at: "1"}, "set exactly one of --delay"},
		{"delay without a unit", sendFlags{target: "orders", delay: "5"}, "--delay 5 has no unit: did you mean 5s, or 5ms?"},
		{"time in unix seconds", sendFlags{target: "orders", at: "1795334400"},
			"--at 1795334400 looks like unix seconds (2026-11-22T08:00:00Z), and kdelay reads a number as milliseconds (1970-01-21T18:42:14.400Z): give 1795334400000, or RFC 3339 such as 2026-11-22T08:00:00Z"},
		{"bad delay", sendFlags{target: "orders", delay: "soon"}, `kdelay would dead-letter this record: kdelay-delay "soon" is neither integer milliseconds nor a Go duration`},
		{"negative delay", sendFlags{target: "orders", delay: "-1s"}, `kdelay-delay "-1s" is negative`},
		{"bad time", sendFlags{target: "orders", at: "tomorrow"}, `kdelay-deliver-at "tomorrow" is neither unix epoch milliseconds nor RFC 3339`},
		{"offset past 23:59", sendFlags{target: "orders", at: "2026-11-22T08:00:00+24:00"}, "offset 24:00 is out of range"},
		{"invalid target", sendFlags{target: "bad topic!", delay: "1s"}, `kdelay-target "bad topic!" is not a valid topic name`},
		{"target is the DLQ", sendFlags{target: "kdelay.dlq", delay: "1s"}, `kdelay's own topic "kdelay.dlq"`},
		{"delay beyond max-delay", sendFlags{target: "orders", delay: "10000h"}, "more than the maximum delay 9600h (max-delay) away"},
		{"empty id", sendFlags{target: "orders", delay: "1s", idSet: true}, "kdelay-id is empty"},
		{"header without value", sendFlags{target: "orders", delay: "1s", headers: []string{"trace"}}, `--header "trace" is not name=value`},
		{"routing header", sendFlags{target: "orders", delay: "1s", headers: []string{kdelay.HeaderID + "=x"}}, "--header kdelay-id: set it with --target, --delay, --at or --id instead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := tt.flags.record(kdelay.Rules{}, "hello", time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSendValue(t *testing.T) {
	t.Parallel()
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devNull.Close() })
	tests := []struct {
		name  string
		args  []string
		stdin io.Reader
		want  string
	}{
		{"VALUE", []string{"hello"}, strings.NewReader("ignored"), "hello"},
		{"- reads standard input", []string{"-"}, strings.NewReader("hello\n"), "hello"},
		{"no VALUE reads a pipe", nil, strings.NewReader("hello\n"), "hello"},
		{"only one trailing newline is dropped", nil, strings.NewReader("line one\nline two\n\n"), "line one\nline two\n"},
		{"a CRLF line end is dropped", nil, strings.NewReader("hello\r\n"), "hello"},
		{"a value without a newline is kept whole", []string{"-"}, strings.NewReader("a\r"), "a\r"},
		{"- reads even /dev/null", []string{"-"}, devNull, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := sendValue(tt.args, tt.stdin)
			if err != nil || got != tt.want {
				t.Errorf("sendValue(%q) = %q, %v; want %q", tt.args, got, err, tt.want)
			}
		})
	}

	t.Run("no VALUE and no pipe is a usage mistake", func(t *testing.T) {
		t.Parallel()
		_, err := sendValue(nil, devNull)
		want := "give the record's value as VALUE, or - to read it from standard input"
		if !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want a usage error saying %q", err, want)
		}
	})
}

// Like kcat, send takes the value from a pipe: with - or with no VALUE.
func TestSendFromStdin(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	cluster := kafkatest.New(t)
	prefix := kafkatest.Name(t)
	cluster.DeleteOnCleanup(prefix)
	ingress, target := kdelay.Topics{Prefix: prefix}.Ingress(), prefix+".orders"
	cluster.CreateTopic(ingress, 1, nil)
	cluster.CreateTopic(target, 1, nil) // send refuses a target the broker would not create
	sends := []struct {
		args  []string
		stdin string
	}{
		{[]string{"-"}, "from a pipe with -\n"},
		{nil, "{\"order\": 42}\n"},
		{[]string{"-"}, "two\nlines\n"},
	}
	for _, s := range sends {
		args := append([]string{"send", "--brokers", strings.Join(cluster.Brokers, ","), "--topic-prefix", prefix,
			"--target", target, "--delay", "1h"}, s.args...)
		cmd := command(bin, t.TempDir(), args...)
		cmd.Stdin = strings.NewReader(s.stdin)
		if code, out, _ := runWithin(t, 20*time.Second, cmd); code != 0 || !strings.HasPrefix(out, "id="+ingress+"/") {
			t.Fatalf("printf %q | kdelay %s: exit %d, printed:\n%s\nwant exit 0 and the record's id", s.stdin, strings.Join(args, " "), code, out)
		}
	}
	want := []string{"from a pipe with -", `{"order": 42}`, "two\nlines"}
	got := cluster.Collect(ingress).Until(10*time.Second, all(want))
	if vs := kafkatest.Values(got); len(got) != len(want) || vs[want[0]] != 1 || vs[want[1]] != 1 || vs[want[2]] != 1 {
		t.Errorf("the ingress holds %v, want once each of %q", vs, want)
	}
}

// A due time in the past is taken, as kdelay takes it, and send says the
// record is delivered now; its standard output stays the one line scripts
// read.
func TestSendAlreadyDue(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	cluster := kafkatest.New(t)
	prefix := kafkatest.Name(t)
	cluster.DeleteOnCleanup(prefix)
	target := prefix + ".orders"
	cluster.CreateTopic(kdelay.Topics{Prefix: prefix}.Ingress(), 1, nil)
	cluster.CreateTopic(target, 1, nil)
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	args := []string{"send", "--brokers", strings.Join(cluster.Brokers, ","), "--topic-prefix", prefix,
		"--target", target, "--at", past.Format(time.RFC3339), "hello"}
	var stdout, stderr bytes.Buffer
	cmd := command(bin, t.TempDir(), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer time.AfterFunc(20*time.Second, func() { _ = cmd.Process.Kill() }).Stop()
	err := cmd.Wait()
	want := "kdelay: the due time " + past.Format(timeFormat) + " is already past: kdelay delivers the record now.\n"
	if err != nil || !sendLine.MatchString(stdout.String()) || strings.Count(stdout.String(), "\n") != 1 || stderr.String() != want {
		t.Errorf("kdelay %s: %v; printed %q on standard output and %q on standard error\nwant exit 0, the id line, and %q",
			strings.Join(args, " "), err, stdout.String(), stderr.String(), want)
	}
}

// TestSendTarget checks send's question to the broker before it writes: a
// target that does not exist, on a broker that does not create topics on
// first use, would be dead-lettered at its due time, so send refuses it,
// naming the topic and how to create it, and writes nothing; a broker that
// creates topics on first use creates it, as it would at delivery.
func TestSendTarget(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	setup := func(t *testing.T, cluster *kafkatest.Cluster) (prefix, target string, send func() (int, string)) {
		prefix = kafkatest.Name(t)
		cluster.DeleteOnCleanup(prefix)
		cluster.CreateTopic(kdelay.Topics{Prefix: prefix}.Ingress(), 1, nil)
		target = prefix + ".reminders"
		args := []string{"send", "--brokers", strings.Join(cluster.Brokers, ","), "--topic-prefix", prefix,
			"--target", target, "--delay", "1h", "hello"}
		return prefix, target, func() (int, string) {
			code, out, _ := runWithin(t, 20*time.Second, command(bin, t.TempDir(), args...))
			return code, out
		}
	}
	ingressEnd := func(t *testing.T, cluster *kafkatest.Cluster, prefix string) int64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ingress := kdelay.Topics{Prefix: prefix}.Ingress()
		ends, err := kadm.NewClient(cluster.Client()).ListEndOffsets(ctx, ingress)
		if err != nil || ends.Error() != nil {
			t.Fatalf("end offsets of %s: %v %v", ingress, err, ends.Error())
		}
		o, _ := ends.Lookup(ingress, 0)
		return o.Offset
	}

	t.Run("missing and not created is refused, nothing written", func(t *testing.T) {
		t.Parallel()
		// kafkatest's kfake and scripts/local-kafka create no topic on first use.
		cluster := kafkatest.New(t)
		prefix, target, send := setup(t, cluster)
		code, out := send()
		brokers := strings.Join(cluster.Brokers, ",")
		want := "kdelay: target topic " + target + " does not exist on " + brokers + ", and the broker does not create topics on first use: " +
			"kdelay would dead-letter the record at its due time. Create the topic first (kafka-topics.sh --bootstrap-server " + brokers +
			" --create --topic " + target + "), or let the broker create it (auto.create.topics.enable=true); nothing was written\n"
		if code != 1 || out != want {
			t.Errorf("send to a missing target: exit %d, printed:\n%s\nwant exit 1 and:\n%s", code, out, want)
		}
		if end := ingressEnd(t, cluster, prefix); end != 0 {
			t.Errorf("the ingress holds %d records, want none", end)
		}
	})

	t.Run("missing and created on first use is sent", func(t *testing.T) {
		t.Parallel()
		cluster := kafkatest.New(t, kfake.AllowAutoTopicCreation())
		if cluster.Real() {
			t.Skip("whether a real broker creates topics on first use is its own setting")
		}
		prefix, target, send := setup(t, cluster)
		if code, out := send(); code != 0 || !sendLine.MatchString(out) {
			t.Errorf("send to a target the broker creates: exit %d, printed:\n%s\nwant exit 0 and the id line", code, out)
		}
		if end := ingressEnd(t, cluster, prefix); end != 1 {
			t.Errorf("the ingress holds %d records, want the one sent", end)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		listed, err := kadm.NewClient(cluster.Client()).ListTopics(ctx, target)
		if err != nil || !listed.Has(target) {
			t.Errorf("topics after the send: %v %v, want %s, which the broker creates when asked", listed.Names(), err, target)
		}
	})
}
