package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// sweepColumns head the rows of the table, in the order of sweepCells; the
// broker's with the embedded broker only.
func sweepColumns(embedded bool) []string {
	cols := []string{"RATE", "SENT/S", "DELIVERED", "LOST", "EARLY", "DUPS", "P50 ms", "P99 ms", "MAX ms",
		"FLOOR P50", "FLOOR P99", "FLOOR MAX", "P99−FLOOR", "MAX−FLOOR", "PEAK RSS MB", "CPU %"}
	if embedded {
		cols = append(cols, "BROKER RSS MB", "BROKER CPU %")
	}
	return cols
}

// sweepCells are a row's figures as the table writes them.
func sweepCells(r SweepRow, embedded bool) []string {
	j, f := r.Judged, r.Floor
	cells := []string{
		strconv.Itoa(r.Rate), strconv.FormatFloat(r.SentRate, 'f', 0, 64), count(r.Delivered), count(r.Lost), count(r.Early),
		count(r.Duplicates), ms(j.P50), ms(j.P99), ms(j.Max), ms(f.P50), ms(f.P99), ms(f.Max),
		ms(r.P99OverFloor), ms(r.MaxOverFloor), mbCell(r.Serve.PeakRSS), cpuCell(r.Serve.CPU),
	}
	if embedded {
		b := SweepProc{PeakRSS: -1, CPU: -1}
		if r.Broker != nil {
			b = *r.Broker
		}
		cells = append(cells, mbCell(b.PeakRSS), cpuCell(b.CPU))
	}
	return cells
}

func cpuCell(percent float64) string {
	if percent < 0 {
		return "-"
	}
	return strconv.FormatFloat(percent, 'f', 1, 64)
}

// writeSweepProgress writes a row as one line, as its rate ends.
func writeSweepProgress(w io.Writer, r SweepRow) {
	var b strings.Builder
	fmt.Fprintf(&b, "sweep %d/s: sent %.0f/s, delivered %d, lost %d, early %d, p99 %s ms (floor %s), max %s ms (floor %s), peak RSS %s MB, CPU %s%%",
		r.Rate, r.SentRate, r.Delivered, r.Lost, r.Early, ms(r.Judged.P99), ms(r.Floor.P99), ms(r.Judged.Max), ms(r.Floor.Max),
		mbCell(r.Serve.PeakRSS), cpuCell(r.Serve.CPU))
	if p := r.Broker; p != nil {
		fmt.Fprintf(&b, "; broker peak RSS %s MB, CPU %s%%", mbCell(p.PeakRSS), cpuCell(p.CPU))
	}
	if r.Error != "" {
		fmt.Fprintf(&b, " (ended early: %s)", r.Error)
	}
	fmt.Fprintln(w, b.String())
}

// WriteSweepTable writes r for a reader: the run, a row per rate with its
// lateness beside the floor and its processes, what to read each row with,
// and the goals.
func WriteSweepTable(w io.Writer, r *SweepReport) error {
	broker := r.Broker
	if r.Embedded {
		broker = "the embedded broker (a kdelay serve of its own, fresh for each rate)"
	}
	fmt.Fprintf(w, "kdelay bench sweep on %s, %s, delivery %s\n", broker, r.Runner, r.Delivery)
	fmt.Fprintf(w, "Each rate for %s on a fresh kdelay serve, delays %s to %s (log-uniform); lateness of the records due from %s into the run (the warm-up) to its end; /proc read every %s; run took %s\n",
		r.For, r.MinDelay, r.MaxDelay, r.Warmup, r.Interval, r.Elapsed.Round(time.Second))
	if len(r.ServeFlags) > 0 {
		fmt.Fprintf(w, "kdelay serve flags: %s\n", strings.Join(r.ServeFlags, " "))
	}
	if r.MaxRate > 0 {
		fmt.Fprintf(w, "Maximum forwarding rate %.0f records/s over %d records due at once; half of it, %d/s, is among the rates\n",
			r.MaxRate, r.MaxRecords, halfRate(r.MaxRate))
	}
	fmt.Fprintf(w, "Machine %d CPUs (%s), GOMAXPROCS %d, %s, steal %s\n", r.Machine.CPUs, r.Machine.Model, r.Machine.GOMAXPROCS, r.Machine.Go, percent(r.Machine.Steal))
	writeSweepNotes(w, r.Rows)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t\n", strings.Join(sweepColumns(r.Embedded), "\t"))
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t\n", strings.Join(sweepCells(row, r.Embedded), "\t"))
	}
	fmt.Fprintln(tw)
	writeGoals(tw, r.Goals)
	return tw.Flush()
}

// writeSweepNotes says what a row measured other than it seems to: a rate
// the writer did not reach, figures of the whole benchmark process, a run
// that ended early.
func writeSweepNotes(w io.Writer, rows []SweepRow) {
	for _, r := range rows {
		switch {
		case r.Error != "":
			fmt.Fprintf(w, "The run at %d/s ended early: %s\n", r.Rate, r.Error)
		case !r.KeptUp():
			fmt.Fprintf(w, "The writer did not keep up at %d/s: it sent %.0f/s, the rate that row measures\n", r.Rate, r.SentRate)
		}
		if r.Serve.Shared {
			fmt.Fprintf(w, "At %d/s kdelay serve ran in the benchmark's process: its RSS and CPU are the whole process's, not judged\n", r.Rate)
		}
	}
}

// WriteSweepJSON writes r as indented JSON: every group of every rate.
func WriteSweepJSON(w io.Writer, r *SweepReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteSweepCSV writes r's rows, one per rate, in raw units: bytes,
// milliseconds, percent of a core; -1 where a figure was not read, and the
// broker's columns empty on a cluster.
func WriteSweepCSV(w io.Writer, r *SweepReport) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"rate", "sent", "sent_per_second", "delivered", "lost", "early", "duplicates",
		"p50_ms", "p99_ms", "max_ms", "floor_p50_ms", "floor_p99_ms", "floor_max_ms", "p99_over_floor_ms", "max_over_floor_ms",
		"peak_rss_bytes", "cpu_percent", "broker_peak_rss_bytes", "broker_cpu_percent", "send_failed", "error"})
	for _, row := range r.Rows {
		j, f := row.Judged, row.Floor
		cells := []string{strconv.Itoa(row.Rate), count(row.Sent), strconv.FormatFloat(row.SentRate, 'f', 1, 64),
			count(row.Delivered), count(row.Lost), count(row.Early), count(row.Duplicates),
			ms(j.P50), ms(j.P99), ms(j.Max), ms(f.P50), ms(f.P99), ms(f.Max), ms(row.P99OverFloor), ms(row.MaxOverFloor),
			count(row.Serve.PeakRSS), csvPercent(row.Serve.CPU)}
		if b := row.Broker; b != nil {
			cells = append(cells, count(b.PeakRSS), csvPercent(b.CPU))
		} else {
			cells = append(cells, "", "")
		}
		_ = cw.Write(append(cells, count(row.SendFailed), row.Error))
	}
	cw.Flush()
	return cw.Error()
}

func csvPercent(p float64) string {
	if p < 0 {
		return "-1"
	}
	return strconv.FormatFloat(p, 'f', 2, 64)
}
