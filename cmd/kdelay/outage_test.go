package main

import (
	"context"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// outage is how long TestOutageLogs keeps the broker down: three fold
// intervals, so that a failure is seen first, counted and stopped.
const outage = 30 * time.Second

// Bounds of what serve may log for a broker outage. A cause is the same
// failure seen by every client that has it. While the broker is down each
// cause writes its first line and one count per interval: outage/foldInterval
// + 2 lines at most. Until it stops, one more count (the second or two the
// clients take to reconnect) and its stopped line. The causes are the kinds
// of failure an outage shows -- franz-go's dial, read and handshake errors,
// its group loop's, kdelay's fetch errors -- about ten, fewer than serve has
// clients: without folding each client wrote a line per retry.
const (
	whileDown = int(outage/foldInterval) + 2
	perCause  = whileDown + 2
	maxCauses = 16
)

// TestOutageLogs stops the broker under a running `kdelay serve` for 30s and
// reads what serve logged: one line per cause per interval with a count,
// never one per client per retry; the first failure of a cause and its end
// each once.
func TestOutageLogs(t *testing.T) {
	t.Parallel()
	if os.Getenv(kafkatest.EnvBrokers) != "" {
		t.Skip("stops the broker for 30s: it needs a kfake broker of its own, and KDELAY_TEST_BROKERS names a shared cluster that must stay up")
	}
	if testing.Short() {
		t.Skip("keeps a broker down for 30s; skipped with -short")
	}
	data := t.TempDir()
	first := kafkatest.New(t, kfake.DataDir(data))
	name := kafkatest.Name(t)
	target := name + ".target"
	first.CreateTopic(target, 1, nil)
	s := startServe(t, binary(t), "serve", "--brokers", strings.Join(first.Brokers, ","), "--topic-prefix", name, "--group", name)

	before := len(slogLines(s.out.String()))
	first.Fake.Close()
	<-time.After(outage) // the fault under test: the broker stays down this long
	down := len(slogLines(s.out.String())) - before
	// The same data and port: to serve, the broker is back.
	second := kafkatest.New(t, kfake.DataDir(data), kfake.Ports(brokerPort(t, first.Brokers[0])))
	sendAfterOutage(t, second, name, target)
	if got := kafkatest.Collect(t, second.Brokers, target).Until(60*time.Second, all([]string{"after the outage"})); len(got) != 1 {
		t.Fatalf("after the broker came back, %d records reached %s, want the one sent", len(got), target)
	}
	// The last counts and the stopped lines come up to two intervals after
	// the last failure.
	var lines []string
	var c map[string]*causeLines
	stopped := eventually(3*foldInterval, func() bool {
		lines = slogLines(s.out.String())[before:]
		c = byCause(lines)
		return allStopped(c)
	})
	t.Logf("%d lines while the broker was down for %s, %d until every cause stopped:\n%s", down, outage, len(lines), strings.Join(lines, "\n"))
	if !stopped {
		t.Errorf("%s after the broker came back, not every failure has its stopped line", 3*foldInterval)
	}
	if len(c) > maxCauses {
		t.Errorf("%d causes of failure, want at most %d: one per kind of failure, not per client", len(c), maxCauses)
	}
	if limit := len(c) * whileDown; down > limit {
		t.Errorf("%d lines while the broker was down, for %d causes: want at most %d, %d a cause", down, len(c), limit, whileDown)
	}
	for cause, n := range c {
		if n.first != 1 || n.stopped > 1 || n.first+n.repeated+n.stopped > perCause {
			t.Errorf("cause %s: %d first lines, %d counts, %d stopped lines; want 1 first, at most %d lines, 1 stopped if counted",
				cause, n.first, n.repeated, n.stopped, perCause)
		}
	}
}

// causeLines counts the lines of one cause by kind.
type causeLines struct{ first, repeated, stopped int }

var (
	levelAttr   = regexp.MustCompile(` level=(\S+)`)
	msgAttr     = attrPattern("msg")
	errAttr     = attrPattern("err")
	addrAttr    = attrPattern("addr")
	countLine   = regexp.MustCompile(` repeated=\d+ interval=\S+$`)
	stoppedLine = regexp.MustCompile(` stopped=true total=\d+ last_seen=\S+$`)
)

// attrPattern matches the attribute name in a text log line, and its value,
// quoted or not.
func attrPattern(name string) *regexp.Regexp {
	return regexp.MustCompile(` ` + name + `=("(?:[^"\\]|\\.)*"|\S+)`)
}

// byCause sorts the failures among lines by cause, as fold names them: the
// level, message, error with its digits masked and broker address.
func byCause(lines []string) map[string]*causeLines {
	c := map[string]*causeLines{}
	for _, l := range lines {
		err := attrValue(errAttr, l)
		if err == "" {
			continue
		}
		cause := strings.Join([]string{attrValue(levelAttr, l), attrValue(msgAttr, l), maskDigits(err), attrValue(addrAttr, l)}, " ")
		n := c[cause]
		if n == nil {
			n = &causeLines{}
			c[cause] = n
		}
		switch {
		case countLine.MatchString(l):
			n.repeated++
		case stoppedLine.MatchString(l):
			n.stopped++
		default:
			n.first++
		}
	}
	return c
}

// allStopped reports whether every cause that was counted has stopped.
func allStopped(c map[string]*causeLines) bool {
	counted := false
	for _, n := range c {
		if n.repeated > 0 && n.stopped == 0 {
			return false
		}
		counted = counted || n.repeated > 0
	}
	return counted
}

// attrValue is the value p matches in l, unquoted; "" if none.
func attrValue(p *regexp.Regexp, l string) string {
	m := p.FindStringSubmatch(l)
	if m == nil {
		return ""
	}
	if v, err := strconv.Unquote(m[1]); err == nil {
		return v
	}
	return m[1]
}

// slogLines are the lines of out that slog wrote.
func slogLines(out string) []string {
	var lines []string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "time=") {
			lines = append(lines, strings.TrimSuffix(l, "\n"))
		}
	}
	return lines
}

// brokerPort is the port of addr, host:port.
func brokerPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(addr)
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("broker address %q has no port", addr)
	}
	return n
}

// sendAfterOutage writes one record due in a second to target, through the
// ingress of the kdelay topics named prefix.
func sendAfterOutage(t *testing.T, c *kafkatest.Cluster, prefix, target string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := &kgo.Record{Topic: kdelay.Topics{Prefix: prefix}.Ingress(), Value: []byte("after the outage"), Headers: []kgo.RecordHeader{
		{Key: kdelay.HeaderTarget, Value: []byte(target)}, {Key: kdelay.HeaderDelay, Value: []byte("1s")}}}
	if err := c.Client().ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("write to the ingress after the outage: %v", err)
	}
}
