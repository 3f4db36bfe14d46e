package bench

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// SoakReport is what Soak measured: plain data, which WriteSoakTable,
// WriteSoakCSV, WriteSoakJSON and WriteSoakSVG write out. Durations are
// nanoseconds in JSON.
type SoakReport struct {
	ServeRun
	// Embedded is true when the kdelay serve under test ran its own
	// broker: its memory holds the broker's too.
	Embedded bool `json:"embedded"`

	Rate      int           `json:"rate"` // records per second
	MinDelay  time.Duration `json:"min_delay_ns"`
	MaxDelay  time.Duration `json:"max_delay_ns"`
	Duration  time.Duration `json:"duration_ns"`
	Interval  time.Duration `json:"interval_ns"`
	Warmup    time.Duration `json:"warmup_ns"`
	MaxGrowth float64       `json:"max_growth_mb_per_hour"`

	Samples []SoakSample `json:"samples"`
	Trends  []Trend      `json:"trends"`
	// Groups are the lateness of the delayed records due within the run,
	// of those due after it (Lost 0: they are pending, not lost), and of
	// the floor.
	Groups     []Group `json:"groups"`
	SendFailed int64   `json:"send_failed"` // records the broker did not take
	// Error says why the run ended before its time, if it did: the
	// samples up to then are kept.
	Error string `json:"error,omitempty"`
	Goals []Goal `json:"goals"`
}

func newSoakReport(cfg *SoakConfig, c *cluster, embedded bool) *SoakReport {
	rep := &SoakReport{
		ServeRun: newServeRun(c.String(), cfg.Runner, cfg.Delivery, cfg.ServeFlags),
		Embedded: embedded, Rate: cfg.Rate, MinDelay: cfg.MinDelay, MaxDelay: cfg.MaxDelay, Duration: cfg.Duration,
		Interval: cfg.Interval, Warmup: cfg.Warmup, MaxGrowth: cfg.MaxGrowth,
	}
	if embedded {
		rep.Broker = "embedded broker of kdelay serve (" + c.brokers[0] + ")"
	}
	return rep
}

// Trend returns the named trend.
func (r *SoakReport) Trend(name string) (Trend, bool) {
	for _, t := range r.Trends {
		if t.Name == name {
			return t, true
		}
	}
	return Trend{}, false
}

// finish stops the run and completes its report: the groups once the
// consumer has stopped, the trends, the goals.
func (r *soakRun) finish(runErr error) *SoakReport {
	rep := r.rep
	rep.SendFailed = r.s.failed.Load()
	if err := errors.Join(runErr, r.close()); err != nil {
		rep.Error = err.Error()
	}
	later := r.later.summary()
	later.Lost = 0
	rep.Groups = []Group{r.due.summary(), later, r.floor.summary()}
	rep.Trends = trends(rep.Samples, rep.Warmup)
	rep.Goals = soakGoals(rep)
	rep.end(r.machine.end())
	return rep
}

// Met reports whether every goal was met and the run ran to its end.
func (r *SoakReport) Met() bool {
	for _, g := range r.Goals {
		if !g.Met {
			return false
		}
	}
	return r.Error == ""
}

// soakGoals: memory does not grow after the warm-up, and every record due
// within the run arrived, none early.
func soakGoals(r *SoakReport) []Goal {
	var goals []Goal
	for _, name := range []string{TrendRSS, TrendHeapLive} {
		if t, ok := r.Trend(name); ok {
			goals = append(goals, growthGoal(t, r.MaxGrowth))
		}
	}
	var early, lost int64
	for _, g := range r.Groups {
		early += g.Early
		lost += g.Lost
	}
	return append(goals,
		Goal{Name: "early records", Want: "0", Got: strconv.FormatInt(early, 10), Met: early == 0},
		Goal{Name: "lost records (due within the run)", Want: "0", Got: strconv.FormatInt(lost, 10), Met: lost == 0},
	)
}

// growthGoal: a figure grows by at most limit MB an hour after the warm-up.
// It is missed only when the growth is beyond limit by more than the run's
// noise (Trend.Noise): a short run cannot tell 1 MB/h from none, and must
// not fail on a sawtooth, but a leak that grows faster than the noise
// fails it; a long run narrows the noise down to the limit itself.
func growthGoal(t Trend, limit float64) Goal {
	return Goal{
		Name: t.Name + " growth after warm-up",
		Want: "≤ " + strconv.FormatFloat(limit, 'g', -1, 64) + " MB/h",
		Got:  fmt.Sprintf("%.2f ± %.2f MB/h", t.PerHour, t.Noise),
		Met:  t.PerHour-t.Noise <= limit,
	}
}
