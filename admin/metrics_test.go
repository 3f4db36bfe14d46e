package admin

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestMetrics delivers records through the ingress and a level, then reads
// /metrics back as Prometheus would.
func TestMetrics(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	fx.run(fx.srv.Run)
	fx.run(fx.fwd.Run)
	fx.waitStatus("/readyz", 200, 30*time.Second)

	// 1.5s hops from the ingress into the 1s level, whose forwarder holds
	// the 0.5s left and delivers it; 0s is delivered by the ingress.
	const hopping, direct = 5, 3
	for i := range hopping + direct {
		delay := "1500ms"
		if i >= hopping {
			delay = "0s"
		}
		r := &kgo.Record{Topic: fx.fcfg.Topics.Ingress(), Value: []byte("v"), Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(fx.target)}, {Key: kdelay.HeaderDelay, Value: []byte(delay)}}}
		if err := fx.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	got := fx.cluster.Collect(fx.target).Until(20*time.Second, func(a []kafkatest.Arrival) bool { return len(a) >= hopping+direct })
	if len(got) != hopping+direct {
		t.Fatalf("%d records reached the target, want %d", len(got), hopping+direct)
	}
	var samples []sample
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		samples = fx.scrape()
		// The loop counts a delivery when it applies the acknowledgement,
		// up to a commit interval after the lateness is observed.
		late, _ := value(samples, "kdelay_delivery_lateness_seconds_count", nil)
		delivered, _ := value(samples, "kdelay_delivered_total", nil)
		if late == hopping+direct && delivered == hopping+direct {
			break
		}
	}

	t.Run("lateness counts every delivery by the level that made it", func(t *testing.T) {
		for level, want := range map[string]float64{"ingress": direct, "1s": hopping} {
			if n, _ := value(samples, "kdelay_delivery_lateness_seconds_count", map[string]string{"level": level}); n != want {
				t.Errorf("kdelay_delivery_lateness_seconds_count{level=%q} = %v, want %v", level, n, want)
			}
		}
		// kdelay is late by milliseconds on kfake; a second would be a bug.
		if n, _ := value(samples, "kdelay_delivery_lateness_seconds_bucket", map[string]string{"le": "1"}); n != hopping+direct {
			t.Errorf("%v deliveries at most 1s late, want all %d", n, hopping+direct)
		}
	})
	t.Run("counters by level", func(t *testing.T) {
		for _, c := range []struct {
			name, level string
			want        float64
		}{
			{"kdelay_delivered_total", "ingress", direct},
			{"kdelay_delivered_total", "1s", hopping},
			{"kdelay_hopped_total", "ingress", hopping},
			{"kdelay_held_total", "1s", hopping},
			{"kdelay_dead_lettered_total", "ingress", 0},
			{"kdelay_retried_total", "2s", 0},
		} {
			if n, ok := value(samples, c.name, map[string]string{"level": c.level}); !ok || n != c.want {
				t.Errorf("%s{level=%q} = %v (present %v), want %v", c.name, c.level, n, ok, c.want)
			}
		}
	})
	t.Run("gauges for every level", func(t *testing.T) {
		for _, name := range []string{"kdelay_pending_records", "kdelay_oldest_due_age_seconds", "kdelay_paused_partitions", "kdelay_buffered_bytes", "kdelay_buffer_borrowed_bytes"} {
			for _, level := range []string{"ingress", "1s", "2s"} {
				if _, ok := value(samples, name, map[string]string{"level": level}); !ok {
					t.Errorf("no %s{level=%q}", name, level)
				}
			}
		}
		if n, _ := value(samples, "kdelay_ready", nil); n != 1 {
			t.Errorf("kdelay_ready = %v, want 1", n)
		}
	})
	t.Run("pending records drop to zero once committed", func(t *testing.T) {
		var n float64
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if n, _ = value(fx.scrape(), "kdelay_pending_records", nil); n == 0 {
				return
			}
		}
		t.Errorf("kdelay_pending_records sums to %v 10s after every record was delivered, want 0", n)
	})
	t.Run("franz-go client metrics of the client every level shares", func(t *testing.T) {
		// At-least-once, one client reads and writes for every level.
		if n, _ := value(samples, "kdelay_produce_records_total", map[string]string{"level": AllLevels}); n < hopping+direct {
			t.Errorf("kdelay_produce_records_total{level=%s} = %v, want at least %d", AllLevels, n, hopping+direct)
		}
	})
	t.Run("no label grows with the data", func(t *testing.T) {
		for _, s := range samples {
			for k, v := range s.labels {
				if k == "topic" || strings.Contains(v, fx.target) {
					t.Errorf("%s has label %s=%q: a target topic or an id must never be a label", s.name, k, v)
				}
			}
		}
	})
	t.Run("the dashboard and the alerts name only metrics that exist", func(t *testing.T) {
		// A schedule's metrics are served beside a scheduler only:
		// TestScheduleMetrics checks those.
		checkNamed(t, samples, func(name string) bool { return !strings.HasPrefix(name, scheduleMetrics) },
			"../docs/grafana/kdelay.json", "../docs/prometheus/alerts.yml")
	})
}

var metricName = regexp.MustCompile(`\bkdelay_[a-z0-9_]+`)

// scheduleMetrics prefixes the metrics of a scheduler.
const scheduleMetrics = "kdelay_schedule"

// checkNamed checks that each file names some kdelay metric that mine
// selects, and that samples has every one of them.
func checkNamed(t *testing.T, samples []sample, mine func(name string) bool, files ...string) {
	t.Helper()
	names := map[string]bool{}
	for _, s := range samples {
		names[s.name] = true
		if base, ok := strings.CutSuffix(s.name, "_bucket"); ok {
			names[base] = true // a histogram, as its help text names it
		}
	}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		used := slices.DeleteFunc(slices.Compact(slices.Sorted(slices.Values(metricName.FindAllString(string(text), -1)))),
			func(name string) bool { return !mine(name) })
		if len(used) == 0 {
			t.Errorf("%s names no kdelay metric of those", file)
		}
		for _, name := range used {
			if !names[name] {
				t.Errorf("%s uses %s, which /metrics does not serve", file, name)
			}
		}
	}
}
