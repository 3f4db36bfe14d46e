package forwarder

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

// TestDroppedLevel changes the levels while a record waits in a level that
// the new configuration drops: the record is still delivered once and never
// early, kdelay says it drains the old level and when it is done, the
// drainer then stops but keeps its topic, and the other levels go on
// forwarding.
func TestDroppedLevel(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "5s", "10s"})
	arrived := fx.cluster.Collect(fx.target)
	dropped := fx.cfg.Topics.Level("10s")
	_, stop := fx.start(fx.cfg)

	// 25s from the ingress goes into 10s first as long as the ingress
	// routes it within 15s: 12s left it 2s, and once in CI (Kafka 3.9.1,
	// loaded) it did not reach 10s, as a router 2s late plans into 5s.
	sent := fx.send("stranded", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "25000")
	due := sent.Timestamp.Truncate(time.Millisecond).Add(25 * time.Second)
	waitFor(t, 15*time.Second, "the record to reach "+dropped, func() bool { return fx.records(dropped) == 1 })
	stop()

	logs := &logBuffer{}
	cfg := fx.cfg
	cfg.Levels = mustParse(t, "1s", "5s")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	f, stop := fx.start(cfg)

	t.Run("the record in the dropped level is delivered once, never early", func(t *testing.T) {
		got := arrived.Until(45*time.Second, atLeast(1))
		if len(got) != 1 {
			t.Fatalf("%d records delivered within 45s of the restart, want the one left in %s", len(got), dropped)
		}
		if got[0].At.Before(due) {
			t.Errorf("delivered %s before it was due", due.Sub(got[0].At))
		}
	})

	t.Run("kdelay says it drains the dropped level and when it is done, then leaves it", func(t *testing.T) {
		if want := "msg=draining_dropped_level topic=" + dropped + " records=1"; !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
		waitFor(t, 20*time.Second, "the drain to end", func() bool {
			return strings.Contains(logs.String(), "msg=dropped_level_drained topic="+dropped)
		})
		if !strings.Contains(logs.String(), "--delete --topic "+dropped) {
			t.Errorf("the drained message does not say how to delete %s:\n%s", dropped, logs)
		}
		// Its worker stops; the client every stage shares goes on
		// without it (its topic paused), rather than leave the group,
		// which would rebalance every stage.
		waitFor(t, 10*time.Second, "the drainer of "+dropped+" to stop", func() bool { return stopped(f, dropped) })
		if fx.records(dropped) != 1 {
			t.Errorf("%s is gone or changed; kdelay must leave it for the user to delete", dropped)
		}
	})

	t.Run("the configured levels go on after the drain ends", func(t *testing.T) {
		fx.send("after", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "1500")
		if got := arrived.Until(20*time.Second, atLeast(2)); len(got) < 2 {
			t.Fatalf("a record sent after the drain ended was not delivered within 20s")
		}
	})

	stop()
	// A duplicate would have been produced before stop returned; give the
	// collector a second to see it.
	for value, n := range kafkatest.Values(arrived.Until(time.Second, atLeast(3))) {
		if n > 1 {
			t.Errorf("%q delivered %d times, want once", value, n)
		}
	}
}

// TestDroppedLevelNotices checks what kdelay says at start about level topics
// of its prefix that it does not drain: one whose name is not a level, and a
// dropped level with nothing left in it.
func TestDroppedLevelNotices(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "5s"})
	notLevel, empty := fx.cfg.Topics.Level("soon"), fx.cfg.Topics.Level("30s")
	fx.cluster.CreateTopic(notLevel, 1, nil)
	fx.cluster.CreateTopic(empty, 1, nil)
	// A real broker lists a new topic a moment after creating it.
	waitFor(t, 10*time.Second, "the topics to be listed", func() bool { return fx.records(notLevel) == 0 && fx.records(empty) == 0 })
	logs := &logBuffer{}
	cfg := fx.cfg
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	fx.start(cfg)
	for _, want := range []string{
		"level=WARN msg=level_topic_not_a_level topic=" + notLevel,
		"msg=dropped_level_empty topic=" + empty + ` delete_with="kafka-topics.sh`,
		"draining=0",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	// The group is the one every stage is read with: no hint to delete it.
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "dropped_level_empty") && strings.Contains(line, "kafka-consumer-groups.sh") {
			t.Errorf("the hint names a group to delete: %s", line)
		}
	}
}

// records counts the records a topic holds, or -1 when it cannot be listed.
func (fx *fixture) records(topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadmClient(fx.cl)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	ends, err2 := adm.ListEndOffsets(ctx, topic)
	if errors.Join(err, err2, ends.Error()) != nil {
		return -1
	}
	var n int64
	for p, end := range ends[topic] {
		n += end.Offset - starts[topic][p].Offset
	}
	return n
}

// members counts the members of a consumer group, or -1 when it cannot be
// described.
func (fx *fixture) members(group string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups, err := kadmClient(fx.cl).DescribeGroups(ctx, group)
	if err == nil {
		err = groups.Error()
	}
	if err != nil {
		return -1
	}
	return len(groups[group].Members)
}

// waitFor polls cond every 50ms until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mustParse(t *testing.T, names ...string) levels.Set {
	t.Helper()
	set, err := levels.Parse(names)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// logBuffer collects what a logger writes, for tests that check what kdelay
// tells its user.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stopped reports whether f's worker of topic has shut down.
func stopped(f *Forwarder, topic string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.workers {
		if w.source == topic {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.stopped
		}
	}
	return false
}
