package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kdelay/kdelay/schedule"
)

// SchedulesReport is what Schedules measured: plain data, which
// WriteSchedulesTable and WriteSchedulesJSON write out. Durations are
// nanoseconds in JSON, memory bytes.
type SchedulesReport struct {
	ServeRun

	Schedules int           `json:"schedules"` // in force, timed ones included
	Timed     int           `json:"timed"`
	Every     time.Duration `json:"every_ns"`
	For       time.Duration `json:"for_ns"`
	Warmup    time.Duration `json:"warmup_ns"`

	// Write is how long the benchmark took to write the schedules that
	// are not timed; Load, how long after that kdelay serve had them all
	// in force (kdelay_schedules).
	Write time.Duration `json:"write_ns"`
	Load  time.Duration `json:"load_ns"`

	// RSSEmpty is kdelay serve's resident memory before any schedule,
	// RSSLoaded with the schedules in force, once settled; PeakRSS its
	// kernel high-water mark over the whole run; -1 if unread. Shared:
	// they are the benchmark's own process's (InProcess).
	RSSEmpty  int64 `json:"rss_empty_bytes"`
	RSSLoaded int64 `json:"rss_loaded_bytes"`
	PeakRSS   int64 `json:"peak_rss_bytes"`
	Shared    bool  `json:"shared,omitempty"`

	// IndexBytes is what the scheduler held for the schedule ids once
	// they were in force (kdelay_schedule_index_bytes), read with
	// RSSLoaded; -1 if unread. Partitions are the schedules topic's.
	IndexBytes int64 `json:"index_bytes"`
	Partitions int   `json:"partitions"`

	// Occurrences are the timed schedules' occurrences due from Warmup
	// into the timed span to its end; Warm, those due before, judged
	// for loss and earliness only; Floor, a plain timer's record produced
	// to the same target at each of Occurrences' times.
	Occurrences Group `json:"occurrences"`
	Warm        Group `json:"warm"`
	Floor       Group `json:"floor"`
}

func newSchedulesReport(cfg *SchedulesConfig) *SchedulesReport {
	return &SchedulesReport{
		ServeRun: newServeRun(brokerName(cfg.Brokers), cfg.Runner, cfg.Delivery, cfg.ServeFlags), Schedules: cfg.Schedules, Timed: cfg.Timed, Every: cfg.Every, For: cfg.For,
		Warmup: cfg.Warmup, RSSEmpty: -1, RSSLoaded: -1, PeakRSS: -1, IndexBytes: -1,
	}
}

// PerSchedule is the resident memory each schedule added, in bytes: the
// loaded RSS less the empty, over the schedules; 0 if either is unread.
func (r *SchedulesReport) PerSchedule() float64 {
	if r.RSSEmpty <= 0 || r.RSSLoaded <= 0 || r.Schedules == 0 {
		return 0
	}
	return float64(r.RSSLoaded-r.RSSEmpty) / float64(r.Schedules)
}

// IndexMet reports whether the scheduler's index held no more than the
// bound docs/SCHEDULES.md states (schedule.MaxIndexBytes); true if unread.
func (r *SchedulesReport) IndexMet() bool {
	return r.IndexBytes < 0 || r.IndexBytes <= schedule.MaxIndexBytes(r.Schedules, r.Partitions)
}

// Met reports whether every occurrence due within the run arrived, none
// early, and the index held within its bound.
func (r *SchedulesReport) Met() bool {
	return r.Occurrences.Sent > 0 && r.Occurrences.Lost == 0 && r.Warm.Lost == 0 &&
		r.Occurrences.Early == 0 && r.Warm.Early == 0 && r.IndexMet()
}

// WriteSchedulesTable writes the report for a reader.
func WriteSchedulesTable(w io.Writer, r *SchedulesReport) error {
	fmt.Fprintf(w, "kdelay bench schedules on %s, %s, delivery %s; run took %s\n", r.Broker, r.Runner, r.Delivery, r.Elapsed.Round(time.Second))
	if len(r.ServeFlags) > 0 {
		fmt.Fprintf(w, "kdelay serve flags: %s\n", strings.Join(r.ServeFlags, " "))
	}
	fmt.Fprintf(w, "Machine %d CPUs (%s), GOMAXPROCS %d, %s, steal %s\n", r.Machine.CPUs, r.Machine.Model, r.Machine.GOMAXPROCS, r.Machine.Go, percent(r.Machine.Steal))
	fmt.Fprintf(w, "%d schedules written in %s, in force in kdelay serve %s later\n", r.Schedules-r.Timed, r.Write.Round(time.Millisecond), r.Load.Round(time.Millisecond))
	shared := ""
	if r.Shared {
		shared = " (the benchmark's own process: broker and benchmark included)"
	}
	fmt.Fprintf(w, "kdelay serve RSS%s: %s MiB with no schedule, %s MiB with %d (%.0f bytes a schedule), peak %s MiB\n",
		shared, mib(r.RSSEmpty), mib(r.RSSLoaded), r.Schedules, r.PerSchedule(), mib(r.PeakRSS))
	if r.IndexBytes >= 0 {
		verdict := "within"
		if !r.IndexMet() {
			verdict = "OVER"
		}
		fmt.Fprintf(w, "scheduler's index: %s MiB, %.1f bytes a schedule, %s the bound of 72 a schedule and a page a partition (%d partitions)\n",
			mib(r.IndexBytes), float64(r.IndexBytes)/float64(max(r.Schedules, 1)), verdict, r.Partitions)
	}
	fmt.Fprintf(w, "%d schedules @every %s timed for %s; lateness of the occurrences due from %s in, beside the floor (a timer and one produce at each occurrence's time)\n\n",
		r.Timed, r.Every, r.For, r.Warmup)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "group\tsent\tdelivered\tlost\tearly\tduplicates\tp50\tp90\tp99\tmax\t\n")
	for _, g := range []Group{r.Occurrences, r.Floor, r.Warm} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t\n", g.Name, g.Sent, g.Delivered, g.Lost, g.Early, g.Duplicates,
			ms(g.P50), ms(g.P90), ms(g.P99), ms(g.Max))
	}
	return tw.Flush()
}

// mib is bytes in MiB, "-" when unread.
func mib(b int64) string {
	if b < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(b)/(1<<20))
}

// WriteSchedulesJSON writes r as indented JSON.
func WriteSchedulesJSON(w io.Writer, r *SchedulesReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
