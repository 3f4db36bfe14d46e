package console

import (
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kdelay/kdelay/admin"
)

// TestLive: the Live page shows, per level, what the process's own
// histogram counted: since it started, and between the page's readings.
func TestLive(t *testing.T) {
	t.Parallel()
	m := admin.NewMetrics()
	ingress, oneMinute := m.Level("ingress"), m.Level("1m")
	m.Level("1h")
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	f := setup(t, false, func(c *Config) {
		c.Live = m
		c.NowFunc = func() time.Time { return time.Unix(0, clock.Load()) }
	})
	cell := func(page, level, class string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)<tr data-level="` + regexp.QuoteMeta(level) + `">.*?<td class="n ` + class + `">([^<]*)</td>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no %s cell for level %s in the page:\n%s", class, level, page)
		}
		return m[1]
	}

	for range 10 {
		oneMinute.Delivered(3 * time.Millisecond)
	}
	code, page := f.get("/live")
	t.Run("the first reading shows what was delivered since the start, by level in the fleet's order", func(t *testing.T) {
		if code != http.StatusOK || cell(page, "1m", "start-records") != "10" || cell(page, "ingress", "start-records") != "0" {
			t.Fatalf("GET /live: %d\n%s\nwant 10 delivered by 1m, none by the ingress", code, page)
		}
		if i, j, k := strings.Index(page, `data-level="ingress"`), strings.Index(page, `data-level="1m"`), strings.Index(page, `data-level="1h"`); i > j || j > k {
			t.Errorf("the rows are not in the order ingress, 1m, 1h:\n%s", page)
		}
		if !strings.Contains(page, "from the next reading on") || !strings.Contains(page, `<meta http-equiv="refresh" content="5">`) {
			t.Errorf("the first reading does not say the recent figures come next, or the page does not reload itself:\n%s", page)
		}
	})

	clock.Add(int64(10 * time.Second))
	for range 19 {
		oneMinute.Delivered(3 * time.Millisecond)
	}
	oneMinute.Delivered(20 * time.Second)
	ingress.Delivered(time.Millisecond)
	_, page = f.get("/live")
	t.Run("the next shows the deliveries between the two, per second and how late", func(t *testing.T) {
		tests := []struct{ level, class, want string }{
			{"1m", "recent-records", "20"},
			{"1m", "per-second", "2.0"},
			// The 10th of 20 is in the bucket (2.5ms, 5ms] of 19:
			// 2.5ms + 2.5ms × 10/19.
			{"1m", "recent-p50", "4ms"},
			// The 19.8th is in (10s, 30s], which holds the 20th alone.
			{"1m", "recent-p99", "26s"},
			{"1m", "start-records", "30"},
			{"ingress", "per-second", "0.1"},
			{"1h", "recent-p50", "–"},
		}
		for _, tt := range tests {
			if got := cell(page, tt.level, tt.class); got != tt.want {
				t.Errorf("%s %s: %q, want %q", tt.level, tt.class, got, tt.want)
			}
		}
		if !strings.Contains(page, "The last 10s") {
			t.Errorf("the page does not say the window it read:\n%s", page)
		}
	})
}

func TestLiveApart(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	if _, page := f.get("/"); strings.Contains(page, `href="live"`) {
		t.Errorf("a console with no Live links to the Live page")
	}
	if code, page := f.get("/live"); code != http.StatusNotFound || !strings.Contains(page, "runs apart from kdelay&#39;s forwarders") {
		t.Errorf("GET /live with no Live: %d\n%s\nwant 404 saying why", code, page)
	}
}
