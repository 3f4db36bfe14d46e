package admin

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
)

// TestScheduleMetrics runs a scheduler beside the forwarder and reads its
// figures from /metrics: one schedule in force, its next occurrence to
// write, the occurrences written, and the one written late because the
// schedule's record says it began before it was written.
func TestScheduleMetrics(t *testing.T) {
	t.Parallel()
	fx := setupScheduled(t)
	fx.run(fx.srv.Run)
	fx.run(fx.fwd.Run)
	fx.waitStatus("/readyz", 200, 30*time.Second)
	fx.run(fx.sched.Run)

	began := time.Now().Add(-10 * time.Second)
	r := &kgo.Record{Topic: fx.fcfg.Topics.Schedules(), Key: []byte("every-2s"), Value: []byte("v"), Timestamp: began,
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderSchedule, Value: []byte("@every 2s")}, {Key: kdelay.HeaderTarget, Value: []byte(fx.target)}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := fx.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("write the schedule: %v", err)
	}
	var samples []sample
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		samples = fx.scrape()
		if n, _ := value(samples, "kdelay_schedule_occurrences_total", nil); n >= 2 {
			break
		}
	}
	now := time.Now()
	if n, _ := value(samples, "kdelay_schedule_occurrences_total", nil); n < 2 {
		t.Fatalf("kdelay_schedule_occurrences_total = %v 30s after the schedule was written, want 2 or more: the latest missed and the next", n)
	}
	if n, ok := value(samples, "kdelay_schedules", nil); !ok || n != 1 {
		t.Errorf("kdelay_schedules = %v (present %v), want 1", n, ok)
	}
	if n, _ := value(samples, "kdelay_schedule_occurrences_late_total", nil); n != 1 {
		t.Errorf("kdelay_schedule_occurrences_late_total = %v, want 1: the latest occurrence missed since %s", n, began)
	}
	// One schedule id: the index's first page of slots, a table and a
	// queue, and no more than a page.
	if n, ok := value(samples, "kdelay_schedule_index_bytes", nil); !ok || n < 56 || n > 64<<10 {
		t.Errorf("kdelay_schedule_index_bytes = %v (present %v), want a page of slots for one schedule id (56 to 64 KiB)", n, ok)
	}
	// max-buffered-bytes covers the index too: the records get the rest.
	index, _ := value(samples, "kdelay_schedule_index_bytes", nil)
	if n, ok := value(samples, "kdelay_buffer_budget_bytes", nil); !ok || n != float64(forwarder.DefaultMaxBufferedBytes)-index {
		t.Errorf("kdelay_buffer_budget_bytes = %v (present %v), want max-buffered-bytes %d less the index's %v",
			n, ok, forwarder.DefaultMaxBufferedBytes, index)
	}
	// The occurrences of the next minute are written: the next to write is
	// a minute ahead, or a little less.
	next, ok := value(samples, "kdelay_schedule_next_occurrence_timestamp_seconds", nil)
	if at := time.UnixMilli(int64(next * 1e3)); !ok || at.Before(now.Add(50*time.Second)) || at.After(now.Add(62*time.Second)) {
		t.Errorf("kdelay_schedule_next_occurrence_timestamp_seconds = %s (present %v), want a minute after %s", at, ok, now)
	}

	t.Run("the alerts name only metrics that exist", func(t *testing.T) {
		checkNamed(t, samples, func(name string) bool { return strings.HasPrefix(name, scheduleMetrics) }, "../docs/prometheus/alerts.yml")
	})
	t.Run("docs/OPERATING.md lists each", func(t *testing.T) {
		text, err := os.ReadFile("../docs/OPERATING.md")
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"kdelay_schedules", "kdelay_schedule_next_occurrence_timestamp_seconds",
			"kdelay_schedule_occurrences_total", "kdelay_schedule_occurrences_late_total", "kdelay_schedule_index_bytes",
			"kdelay_buffer_budget_bytes"} {
			if !strings.Contains(string(text), "| `"+name+"` |") {
				t.Errorf("docs/OPERATING.md has no row for %s", name)
			}
		}
	})
}
