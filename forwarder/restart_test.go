package forwarder

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestRestart stops the forwarder while records are in every stage (in the
// ingress, waiting in levels, held below the smallest level, in flight) and
// starts a new one in the same group: every record is delivered once, none
// early.
func TestRestart(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	arrived := fx.cluster.Collect(fx.target)
	_, stop := fx.start(fx.cfg)

	const n = 300
	rng := rand.New(rand.NewPCG(3, 4))
	due := map[string]time.Time{}
	for i := range n {
		d := time.Duration(rng.Int64N(int64(4 * time.Second)))
		id := strconv.Itoa(i)
		r := fx.send(id, kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, strconv.FormatInt(d.Milliseconds(), 10), kdelay.HeaderID, id)
		due[id] = r.Timestamp.Truncate(time.Millisecond).Add(d.Truncate(time.Millisecond))
	}
	if got := arrived.Until(30*time.Second, atLeast(n/4)); len(got) < n/4 {
		t.Fatalf("%d records delivered within 30s, want at least %d before the restart", len(got), n/4)
	}
	stop()
	before := len(kafkatest.IDs(arrived.Arrivals()))

	fx.start(fx.cfg)
	got := arrived.Until(60*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	if ids := len(kafkatest.IDs(got)); ids != n {
		t.Fatalf("%d of %d records delivered within 60s of the restart", ids, n)
	}
	// A clean stop hands held records back to the ingress, finishes in-flight produces and
	// commits before leaving, so the new forwarder re-delivers nothing.
	if dups := len(got) - n; dups > 0 {
		t.Errorf("%d records delivered twice across a clean restart, want 0", dups)
	}
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		if a.At.Before(due[id]) {
			t.Errorf("record %s arrived %s early", id, due[id].Sub(a.At))
		}
	}
	t.Logf("%d records, %d delivered before the restart, the rest after it", n, before)
}

// TestRetentionCheck checks kdelay refuses to start when a level topic would
// expire records before they are due, saying which topic and how to fix it.
func TestRetentionCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		configs map[string]*string
		want    []string
	}{
		{"retention shorter than level", map[string]*string{"retention.ms": ptr("60000")},
			[]string{".level.2s keeps records for retention.ms=60000", "kafka-configs.sh", "--entity-name"}},
		{"compacted", map[string]*string{"cleanup.policy": ptr("compact")},
			[]string{".level.2s has cleanup.policy=compact", "cleanup.policy=delete"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := setup(t, []string{"1s", "2s"})
			fx.cluster.CreateTopic(fx.cfg.Topics.Level("2s"), 2, tt.configs)
			f, err := New(fx.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = f.Run(ctx)
			if err == nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Run = %v, want it to refuse the level topic", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	t.Run("long enough", func(t *testing.T) {
		t.Parallel()
		fx := setup(t, []string{"1s", "2s"})
		fx.cluster.CreateTopic(fx.cfg.Topics.Level("2s"), 2, map[string]*string{"retention.ms": ptr("3602000")})
		fx.start(fx.cfg) // fails the test if Run refuses
	})
}
