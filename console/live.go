package console

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/forwarder"
)

// Live is what the process serving the console delivered: *admin.Metrics,
// given to its forwarders as their Observer, is one.
type Live interface {
	Deliveries() []admin.Deliveries
}

// liveWindow is how far back the Live page looks: its recent figures are
// those of the deliveries between the oldest reading it kept from the last
// minute and now. The page asks for itself again every liveRefresh, so
// while it is open a reading a few seconds old is at hand.
const (
	liveWindow  = time.Minute
	liveRefresh = 5 * time.Second
)

// reading is the Deliveries of every level at one time.
type reading struct {
	at     time.Time
	levels []admin.Deliveries
}

// readings keeps the readings of the last liveWindow, one a second at most,
// so at most 60: the page's visits make them, no goroutine of its own.
type readings struct {
	mu   sync.Mutex
	kept []reading // oldest first
}

// add keeps r, and returns the oldest reading of the window before it, if
// there is one.
func (rs *readings) add(r reading) (reading, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	cut := r.at.Add(-liveWindow)
	old := 0
	for old < len(rs.kept) && rs.kept[old].at.Before(cut) {
		old++
	}
	rs.kept = rs.kept[old:]
	var base reading
	found := len(rs.kept) > 0 && r.at.After(rs.kept[0].at)
	if found {
		base = rs.kept[0]
	}
	if len(rs.kept) == 0 || r.at.Sub(rs.kept[len(rs.kept)-1].at) >= time.Second {
		rs.kept = append(rs.kept, r)
	}
	return base, found
}

// livePage is a row per level: its deliveries over the window, and since
// the process started.
type livePage struct {
	Window           time.Duration // 0 when no earlier reading is at hand
	Refresh          time.Duration
	Finest, Coarsest time.Duration // the bounds of the histogram's first and last buckets
	Rows             []liveRow
}

type liveRow struct {
	Level         string
	PerSecond     float64
	Recent, Start lateness
}

// lateness is how many records a level delivered, and the 50th and 99th
// percentile of how late.
type lateness struct {
	Records  uint64
	P50, P99 string
}

func latenessOf(d admin.Deliveries) lateness {
	return lateness{Records: d.Records, P50: quantileText(d, 0.5), P99: quantileText(d, 0.99)}
}

// quantileText is a quantile as the page shows it: "–" with no record,
// "> 5m0s" past the last bucket.
func quantileText(d admin.Deliveries, q float64) string {
	if d.Records == 0 {
		return "–"
	}
	late, over := d.Quantile(q)
	if over {
		return "> " + durationText(late)
	}
	return durationText(late)
}

func (c *Console) live(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Live == nil {
		c.fail(w, r, http.StatusNotFound, errors.New("this console runs apart from kdelay's forwarders, so it has no deliveries of its own to show: open the console on kdelay serve's admin listener, or read kdelay_delivery_lateness_seconds from each serve's /metrics"))
		return
	}
	now := reading{at: c.cfg.NowFunc(), levels: c.cfg.Live.Deliveries()}
	base, found := c.readings.add(now)
	bounds := admin.LatenessBuckets
	p := livePage{Refresh: liveRefresh, Finest: seconds(bounds[0]), Coarsest: seconds(bounds[len(bounds)-1])}
	if found {
		p.Window = now.at.Sub(base.at)
	}
	for _, d := range now.levels {
		row := liveRow{Level: d.Level, Start: latenessOf(d)}
		if i := slices.IndexFunc(base.levels, func(b admin.Deliveries) bool { return b.Level == d.Level }); found && i >= 0 {
			recent := d.Since(base.levels[i])
			row.Recent, row.PerSecond = latenessOf(recent), float64(recent.Records)/p.Window.Seconds()
		}
		p.Rows = append(p.Rows, row)
	}
	slices.SortStableFunc(p.Rows, func(a, b liveRow) int { return cmp.Compare(c.stageOrder(a.Level), c.stageOrder(b.Level)) })
	c.render(w, r, http.StatusOK, "live.html", "live", "Live", p)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// stageOrder places the ingress first, then the levels in the order of the
// fleet's configuration, then any other (a dropped level being drained).
func (c *Console) stageOrder(level string) int {
	if level == forwarder.IngressLevel {
		return -1
	}
	names := c.cfg.Fleet.Config().Levels.Names()
	if i := slices.Index(names, level); i >= 0 {
		return i
	}
	return len(names)
}
