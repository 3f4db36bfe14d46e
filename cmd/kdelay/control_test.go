package main

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

func TestCommandRecord(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 8, 0, 0, 123_456_789, time.UTC) // Kafka keeps 123ms of it
	kept := now.Truncate(time.Millisecond)
	tests := []struct {
		name    string
		command string
		flags   commandFlags
		due     time.Time
		headers []string
	}{
		{"cancel", kdelay.CommandCancel, commandFlags{}, time.Time{}, []string{"kdelay-command=cancel"}},
		{"run-now is due at once", kdelay.CommandRunNow, commandFlags{}, kept, []string{"kdelay-command=run-now"}},
		{"reschedule after a Go duration", kdelay.CommandReschedule, commandFlags{delay: "30s"}, kept.Add(30 * time.Second),
			[]string{"kdelay-command=reschedule", "kdelay-delay=30s"}},
		{"reschedule after milliseconds", kdelay.CommandReschedule, commandFlags{delay: "1500ms"}, kept.Add(1500 * time.Millisecond),
			[]string{"kdelay-command=reschedule", "kdelay-delay=1500ms"}},
		{"reschedule at RFC 3339", kdelay.CommandReschedule, commandFlags{at: "2026-11-22T09:00:00Z"}, time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC),
			[]string{"kdelay-command=reschedule", "kdelay-deliver-at=2026-11-22T09:00:00Z"}},
		{"reschedule at epoch milliseconds, earlier", kdelay.CommandReschedule, commandFlags{at: "1795334400000"}, time.UnixMilli(1795334400000),
			[]string{"kdelay-command=reschedule", "kdelay-deliver-at=1795334400000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, c, err := tt.flags.record(tt.command, "order-42", kdelay.Rules{}, now)
			if err != nil {
				t.Fatalf("record: %v", err)
			}
			var headers []string
			for _, h := range r.Headers {
				headers = append(headers, h.Key+"="+string(h.Value))
			}
			if !slices.Equal(headers, tt.headers) || r.Topic != "kdelay.control" || string(r.Key) != "order-42" ||
				r.Value == nil || len(r.Value) != 0 || !r.Timestamp.Equal(kept) {
				t.Errorf("got topic %s, key %q, value %#v, headers %q, timestamp %s\nwant kdelay.control, order-42, an empty non-null value, %q, %s",
					r.Topic, r.Key, r.Value, headers, r.Timestamp, tt.headers, kept)
			}
			if want := (kdelay.Command{ID: "order-42", Name: tt.command, Due: tt.due}); c != want {
				t.Errorf("got command %+v, want %+v", c, want)
			}
		})
	}
}

func TestCommandRecordErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command string
		id      string
		flags   commandFlags
		want    string
	}{
		{"reschedule without a time", kdelay.CommandReschedule, "order-42", commandFlags{}, "set exactly one of --delay (e.g. 30s) and --at"},
		{"reschedule with a delay and a time", kdelay.CommandReschedule, "order-42", commandFlags{delay: "1s", at: "1"}, "set exactly one of --delay"},
		{"a delay without a unit", kdelay.CommandReschedule, "order-42", commandFlags{delay: "30"}, "--delay 30 has no unit: did you mean 30s, or 30ms?"},
		{"a time in unix seconds", kdelay.CommandReschedule, "order-42", commandFlags{at: "1795334400"}, "--at 1795334400 looks like unix seconds"},
		{"a bad delay", kdelay.CommandReschedule, "order-42", commandFlags{delay: "soon"},
			`kdelay would refuse this command: kdelay-command reschedule: kdelay-delay "soon" is neither integer milliseconds nor a Go duration`},
		{"a delay beyond max-delay", kdelay.CommandReschedule, "order-42", commandFlags{delay: "10000h"}, "more than the maximum delay 9600h (max-delay) away"},
		{"an id kdelay keeps for itself", kdelay.CommandCancel, "\x00mark", commandFlags{}, "starts with a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := tt.flags.record(tt.command, tt.id, kdelay.Rules{}, time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want %q", err, tt.want)
			}
		})
	}
}

// commandCLI is a broker whose control topic, of a prefix of the test's
// own, exists as serve creates it, and a way to run the built binary on it.
type commandCLI struct {
	t       *testing.T
	bin     string
	cluster *kafkatest.Cluster
	topics  kdelay.Topics
}

func setupCommandCLI(t *testing.T) *commandCLI {
	t.Helper()
	c := &commandCLI{t: t, bin: binary(t), cluster: kafkatest.New(t), topics: kdelay.Topics{Prefix: kafkatest.Name(t)}}
	c.cluster.DeleteOnCleanup(c.topics.Prefix)
	compact := "compact"
	c.cluster.CreateTopic(c.topics.Control(), 1, map[string]*string{"cleanup.policy": &compact})
	return c
}

// run runs kdelay with args against the cluster and returns its exit
// status and what it printed.
func (c *commandCLI) run(args ...string) (int, string) {
	c.t.Helper()
	args = append(args, "--brokers", strings.Join(c.cluster.Brokers, ","), "--topic-prefix", c.topics.Prefix)
	code, out, _ := runWithin(c.t, 20*time.Second, command(c.bin, c.t.TempDir(), args...))
	return code, out
}

// Each command writes the record kdelay.ParseCommand reads as meant, and
// says what kdelay will do; a refused one says why, exits 2 and writes
// nothing.
func TestCommandsCLI(t *testing.T) {
	t.Parallel()
	c := setupCommandCLI(t)
	for _, r := range []struct {
		name string
		args []string
		want string
	}{
		{"no id", []string{"cancel"}, "give the kdelay-id of the message: kdelay cancel ID, with the id send printed (id=...)"},
		{"two ids", []string{"run-now", "a", "b"}, "give one id, not 2: kdelay run-now ID, once per message"},
		{"neither --delay nor --at", []string{"reschedule", "order-42"}, "set exactly one of --delay (e.g. 30s) and --at (e.g. 2026-11-22T08:00:00Z)"},
		{"both --delay and --at", []string{"reschedule", "order-42", "--delay", "1s", "--at", "1795334400000"}, "set exactly one of --delay"},
		{"--delay beyond max-delay", []string{"reschedule", "order-42", "--delay", "2h", "--max-delay", "1h"},
			`kdelay would refuse this command: kdelay-command reschedule: kdelay-delay "2h" is more than the maximum delay 1h (max-delay) away; deliver sooner or raise max-delay`},
		{"a misspelt flag", []string{"reschedule", "order-42", "--dealy", "1s"}, "unknown flag: --dealy; did you mean --delay?"},
	} {
		t.Run("refuses "+r.name, func(t *testing.T) {
			if code, out := c.run(r.args...); code != 2 || !strings.Contains(out, r.want) {
				t.Errorf("kdelay %s: exit %d, printed:\n%s\nwant exit 2 and %q", strings.Join(r.args, " "), code, out, r.want)
			}
		})
	}

	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	past := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	control := regexp.QuoteMeta(c.topics.Control())
	// Every command says it cannot know whether the id is pending: kdelay
	// writes a command for an id nothing holds all the same.
	unknown := func(name string) string {
		return ` Whether one is, kdelay cannot tell here: the ` + name + ` is recorded either way\.`
	}
	sends := []struct {
		args    []string
		name    string
		due     func(ts time.Time) time.Time // from the record's timestamp; nil for none
		printed string                       // a regexp of the first line
	}{
		{[]string{"cancel", "order-42"}, kdelay.CommandCancel, nil,
			`cancel order-42: written to ` + control + ` \(partition 0, offset \d+\); if a message with kdelay-id order-42 is pending, kdelay will not deliver it\.` + unknown("cancel")},
		{[]string{"reschedule", "order-43", "--delay", "30s"}, kdelay.CommandReschedule, func(ts time.Time) time.Time { return ts.Add(30 * time.Second) },
			`reschedule order-43: written to ` + control + ` \(partition 0, offset \d+\); if a message with kdelay-id order-43 is pending, kdelay will deliver it at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(in 30s\), and not at its old time\.` + unknown("reschedule")},
		{[]string{"reschedule", "order-44", "--at", at.Format(time.RFC3339)}, kdelay.CommandReschedule, func(time.Time) time.Time { return at },
			`reschedule order-44: written to ` + control + ` \(partition 0, offset \d+\); if a message with kdelay-id order-44 is pending, kdelay will deliver it at ` + regexp.QuoteMeta(at.Format(timeFormat)) + ` \(in \S+\), and not at its old time\.` + unknown("reschedule")},
		{[]string{"reschedule", "order-46", "--at", past.Format(time.RFC3339)}, kdelay.CommandReschedule, func(time.Time) time.Time { return past },
			`reschedule order-46: written to ` + control + ` \(partition 0, offset \d+\); if a message with kdelay-id order-46 is pending, kdelay will deliver it now \(` + regexp.QuoteMeta(past.Format(timeFormat)) + ` is already past\), and not at its old time\.` + unknown("reschedule")},
		{[]string{"run-now", "order-45"}, kdelay.CommandRunNow, func(ts time.Time) time.Time { return ts },
			`run-now order-45: written to ` + control + ` \(partition 0, offset \d+\); if a message with kdelay-id order-45 is pending, kdelay will deliver it now \(\S+\), and not at its old time\.` + unknown("run-now")},
	}
	for _, s := range sends {
		id := s.args[1]
		code, out := c.run(s.args...)
		want := regexp.MustCompile(`^` + s.printed + `\nIf ` + id + ` was delivered already, this cannot undo it: its target topic holds it with header kdelay-id=` + id +
			`, and kdelay logs command_unmatched when a command matched no record\.\n$`)
		if code != 0 || !want.MatchString(out) {
			t.Errorf("kdelay %s: exit %d, printed:\n%s\nwant exit 0 and %s", strings.Join(s.args, " "), code, out, want)
		}
	}

	// Only the commands that were not refused are in the topic.
	got := c.cluster.Collect(c.topics.Control()).Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= len(sends) })
	if len(got) != len(sends) {
		t.Fatalf("%s holds %d records, want the %d commands that were not refused", c.topics.Control(), len(got), len(sends))
	}
	for i, s := range sends {
		r := got[i].Record
		cmd, err := kdelay.ParseCommand(r.Timestamp, r.Key, r.Headers, kdelay.Rules{Topics: c.topics})
		var due time.Time
		if s.due != nil {
			due = s.due(r.Timestamp)
		}
		if want := (kdelay.Command{ID: s.args[1], Name: s.name, Due: due}); err != nil || cmd != want || r.Value == nil || len(r.Value) != 0 {
			t.Errorf("kdelay %s wrote key %q value %#v headers %v: ParseCommand = %+v, %v; want %+v and an empty non-null value",
				strings.Join(s.args, " "), r.Key, r.Value, r.Headers, cmd, err, want)
		}
	}
}

// Without the control topic a command fails at once, saying how to get it.
func TestCommandWithoutControlTopic(t *testing.T) {
	t.Parallel()
	bin, cluster, prefix := binary(t), kafkatest.New(t), kafkatest.Name(t)
	control := kdelay.Topics{Prefix: prefix}.Control()
	args := []string{"cancel", "order-42", "--brokers", strings.Join(cluster.Brokers, ","), "--topic-prefix", prefix}
	code, out, took := runWithin(t, 20*time.Second, command(bin, t.TempDir(), args...))
	want := "topic " + control + " does not exist on " + strings.Join(cluster.Brokers, ",") + ": kdelay serve creates it at start"
	fix := "create it compacted: kafka-topics.sh --bootstrap-server " + strings.Join(cluster.Brokers, ",") + " --create --topic " + control + " --config cleanup.policy=compact,delete"
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, fix) || took > 10*time.Second {
		t.Errorf("kdelay %s: exit %d after %s, printed:\n%s\nwant exit 1 within 10s, saying %q and %q", strings.Join(args, " "), code, took, out, want, fix)
	}
}

// The kcat lines of docs/CANCEL.md write commands kdelay.ParseCommand reads
// as meant: -K: with nothing after the colon sends an empty value, not a null
// one, which would be a tombstone.
func TestDocKcatCommands(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not on PATH; install it (apt-get install kcat) to check the kcat commands of docs/CANCEL.md")
	}
	var lines []string
	for _, s := range shellSteps(t, "docs/CANCEL.md", "## From any other language") {
		if strings.Contains(s.line, "| kcat -P ") {
			lines = append(lines, s.line)
		}
	}
	want := []kdelay.Command{{ID: "order-42", Name: kdelay.CommandCancel}, {ID: "order-42", Name: kdelay.CommandReschedule}, {ID: "order-42", Name: kdelay.CommandRunNow}}
	if len(lines) != len(want) {
		t.Fatalf("docs/CANCEL.md's section has %d kcat -P lines, want %d (cancel, reschedule, run-now):\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	c := setupCommandCLI(t)
	for _, line := range lines {
		// The page writes to the default prefix; this test to its own.
		line = strings.Replace(line, "-t kdelay.control", "-t "+c.topics.Control(), 1)
		cmd := command("bash", t.TempDir(), "-c", line)
		cmd.Env = append(cmd.Env, "KDELAY_LISTEN="+strings.Join(c.cluster.Brokers, ","))
		if code, out, _ := runWithin(t, 20*time.Second, cmd); code != 0 {
			t.Fatalf("%s: exit %d, printed:\n%s", line, code, out)
		}
	}
	got := c.cluster.Collect(c.topics.Control()).Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= len(want) })
	if len(got) != len(want) {
		t.Fatalf("%s holds %d records, want %d", c.topics.Control(), len(got), len(want))
	}
	for i, a := range got {
		cmd, err := kdelay.ParseCommand(a.Timestamp, a.Key, a.Headers, kdelay.Rules{Topics: c.topics})
		w := want[i]
		switch w.Name {
		case kdelay.CommandReschedule:
			w.Due = kdelay.CeilMillis(a.Timestamp).Add(30 * time.Second)
		case kdelay.CommandRunNow:
			w.Due = kdelay.CeilMillis(a.Timestamp)
		}
		if err != nil || cmd != w || a.Value == nil || len(a.Value) != 0 {
			t.Errorf("%s wrote key %q value %#v: ParseCommand = %+v, %v; want %+v and an empty, not null, value", lines[i], a.Key, a.Value, cmd, err, w)
		}
	}
}
