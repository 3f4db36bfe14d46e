package bench

import (
	"fmt"
	"strconv"
	"time"
)

// SweepReport is what Sweep measured: plain data, which WriteSweepTable,
// WriteSweepCSV, WriteSweepJSON and WriteSweepSVG write out. Durations are
// nanoseconds in JSON.
type SweepReport struct {
	ServeRun
	// Embedded is true when each rate ran on a fresh embedded broker, a
	// kdelay serve of its own, whose figures are shown beside.
	Embedded bool `json:"embedded"`

	For      time.Duration `json:"for_ns"`
	MinDelay time.Duration `json:"min_delay_ns"`
	MaxDelay time.Duration `json:"max_delay_ns"`
	Warmup   time.Duration `json:"warmup_ns"`
	Interval time.Duration `json:"interval_ns"`

	// MaxRate is kdelay's forwarding rate, records per second, over
	// MaxRecords records all due at once; half of it is among the rows.
	// 0 without HalfMax.
	MaxRate    float64 `json:"max_rate,omitempty"`
	MaxRecords int     `json:"max_records,omitempty"`

	Rows  []SweepRow `json:"rows"`
	Goals []Goal     `json:"goals"`
}

func newSweepReport(cfg *SweepConfig) *SweepReport {
	return &SweepReport{
		ServeRun: newServeRun(brokerName(cfg.Brokers), cfg.Runner, cfg.Delivery, cfg.ServeFlags), Embedded: len(cfg.Brokers) == 0, For: cfg.For, MinDelay: cfg.MinDelay,
		MaxDelay: cfg.MaxDelay, Warmup: cfg.Warmup, Interval: cfg.Interval,
	}
}

// SweepRow is one rate of a sweep. Judged, Warmup, Later and Floor are
// what was measured; derive fills in the rest.
type SweepRow struct {
	Rate int `json:"rate"` // records per second asked

	// Judged are the records due from the warm-up to the end of the run,
	// whose lateness counts; Warmup, those due before, counted for loss,
	// earliness and duplicates only; Later, those due after the run, still
	// pending when it ended (Lost 0); Floor, the floor's twins of one in
	// ten judged records.
	Judged Group `json:"judged"`
	Warmup Group `json:"warmup"`
	Later  Group `json:"due_later"`
	Floor  Group `json:"floor"`

	Serve SweepProc `json:"serve"`
	// Broker is the embedded broker's process; nil on a cluster.
	Broker     *SweepProc `json:"broker,omitempty"`
	SendFailed int64      `json:"send_failed"` // records the broker did not take
	// Error says why the run ended before its time, if it did.
	Error string `json:"error,omitempty"`

	// Sent is every delayed record written; SentRate, per second of the
	// run: below Rate when the writer could not keep up.
	Sent     int64   `json:"sent"`
	SentRate float64 `json:"sent_per_second"`
	// Delivered, Lost, Early and Duplicates are of the records due within
	// the run, warm-up included (Early and Duplicates of any record).
	Delivered  int64 `json:"delivered"`
	Lost       int64 `json:"lost"`
	Early      int64 `json:"early"`
	Duplicates int64 `json:"duplicates"`
	// P99OverFloor and MaxOverFloor are the judged records' p99 and max
	// lateness less the floor's: what kdelay adds to the machine.
	P99OverFloor time.Duration `json:"p99_over_floor_ns"`
	MaxOverFloor time.Duration `json:"max_over_floor_ns"`
}

// SweepProc is what a process of one rate's run used.
type SweepProc struct {
	// PeakRSS is the most resident memory the process ever had, in bytes:
	// the kernel's high-water mark; -1 if unread.
	PeakRSS int64 `json:"peak_rss_bytes"`
	// CPU is its CPU time over the judged part of the load (from the
	// warm-up to the end), in percent of one core; -1 if unread.
	CPU float64 `json:"cpu_percent"`
	// Shared is true when it is the benchmark's own process (InProcess):
	// the figures are the whole process's, and are not judged.
	Shared bool `json:"shared,omitempty"`
}

// keptUpShare is the share of the rate asked the writer must reach to
// have kept up: it sends exactly Rate × For records when on time.
const keptUpShare = 0.99

// derive fills in the row's totals from its groups, over a run of span.
func (r *SweepRow) derive(span time.Duration) {
	r.Later.Lost = 0 // pending, not lost
	all := []Group{r.Judged, r.Warmup, r.Later}
	r.Sent, r.Delivered, r.Lost, r.Early, r.Duplicates = 0, 0, 0, 0, 0
	for _, g := range all {
		r.Sent += g.Sent
		r.Early += g.Early
		r.Duplicates += g.Duplicates
	}
	for _, g := range all[:2] {
		r.Delivered += g.Delivered
		r.Lost += g.Lost
	}
	r.SentRate = 0
	if span > 0 {
		r.SentRate = float64(r.Sent) / span.Seconds()
	}
	r.P99OverFloor = r.Judged.P99 - r.Floor.P99
	r.MaxOverFloor = r.Judged.Max - r.Floor.Max
}

// KeptUp reports whether the writer sent the rate asked.
func (r SweepRow) KeptUp() bool { return r.SentRate >= keptUpShare*float64(r.Rate) }

// The goals of every rate, by default: lateness at the machine's floor, within the
// memory of the default container (128 MiB, what forwarder's default
// max-buffered-bytes is sized for), nothing lost or early.
const (
	sweepP99OverFloor = 5 * time.Millisecond
	sweepMaxOverFloor = 50 * time.Millisecond
	sweepPeakRSS      = 128 << 20 // bytes: the default container's
)

// sweepGoals are the goals of each row. Peak RSS is judged only for a
// kdelay serve of its own process, as scaleGoals does; lateness only when
// some record was judged, or no lateness would meet it.
func sweepGoals(rows []SweepRow, p99OverFloor, maxOverFloor time.Duration) []Goal {
	var goals []Goal
	for _, r := range rows {
		name := fmt.Sprintf("%d/s: ", r.Rate)
		goals = append(goals,
			overFloor(name+"p99 − floor p99", r, r.P99OverFloor, p99OverFloor),
			overFloor(name+"max − floor max", r, r.MaxOverFloor, maxOverFloor),
		)
		if p := r.Serve; !p.Shared && p.PeakRSS >= 0 {
			goals = append(goals, Goal{
				Name: name + "peak RSS of kdelay serve", Want: fmt.Sprintf("≤ %dMB", sweepPeakRSS>>20),
				Got: megabytes(p.PeakRSS), Met: p.PeakRSS <= sweepPeakRSS,
			})
		}
		goals = append(goals,
			Goal{Name: name + "lost records", Want: "0", Got: strconv.FormatInt(r.Lost, 10), Met: r.Lost == 0},
			Goal{Name: name + "early records", Want: "0", Got: strconv.FormatInt(r.Early, 10), Met: r.Early == 0},
		)
	}
	return goals
}

// overFloor is a goal on lateness above the floor, missed when no record
// was judged.
func overFloor(name string, r SweepRow, got, limit time.Duration) Goal {
	if r.Judged.Delivered == 0 || r.Floor.Delivered == 0 {
		return Goal{Name: name, Want: "≤ " + limit.String(), Got: "no record judged", Met: false}
	}
	return within(name, got, limit)
}

// Met reports whether every goal was met and every rate ran to its end.
func (r *SweepReport) Met() bool {
	for _, g := range r.Goals {
		if !g.Met {
			return false
		}
	}
	for _, row := range r.Rows {
		if row.Error != "" {
			return false
		}
	}
	return true
}
