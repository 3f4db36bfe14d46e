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

// soakColumns head the sample rows of the table and name the figures of a
// progress line, in the order of sampleCells; the broker's with the
// embedded broker only.
func soakColumns(embedded bool) []string {
	cols := []string{"RSS MB", "HEAP MB", "LIVE MB", "GOROUTINES", "FILES", "CONNS", "CPU %"}
	if embedded {
		cols = append(cols, "BROKER RSS", "BROKER LIVE", "BROKER LOG")
	}
	return append(cols, "SENT", "ARRIVED", "P50 ms", "P99 ms", "FLOOR P50", "FLOOR P99")
}

// sampleCells are a sample's figures as the table and the progress lines
// write them; prev, the sample before, gives the CPU share in between.
func sampleCells(s, prev SoakSample) []string {
	p := s.Serve
	cpu := "-"
	if share, ok := cpuShare(p, prev.Serve, s.At-prev.At); ok {
		cpu = strconv.FormatFloat(share, 'f', 1, 64)
	}
	cells := []string{mbCell(p.RSS), mbCell(p.HeapInuse), mbCell(p.HeapLive), countCell(p.Goroutines), countCell(p.OpenFDs), countCell(p.TCPConns), cpu}
	if b := s.Broker; b != nil {
		cells = append(cells, mbCell(b.RSS), mbCell(b.HeapLive), mbCell(s.BrokerLog))
	}
	return append(cells, count(s.Sent), count(s.Arrived), ms(s.Late.P50), ms(s.Late.P99), ms(s.Floor.P50), ms(s.Floor.P99))
}

func mbCell(b int64) string {
	if b < 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64)
}

func countCell(n int64) string {
	if n < 0 {
		return "-"
	}
	return count(n)
}

// clock writes a time into the run as h:mm:ss.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
}

// writeSoakProgress writes the last sample of r as one line: a soak is long,
// and a line per sample shows how it goes, in a terminal or a CI log alike.
func writeSoakProgress(w io.Writer, r *SoakReport) {
	if w == nil || len(r.Samples) == 0 {
		return
	}
	n := len(r.Samples)
	s, prev := r.Samples[n-1], r.Samples[max(n-2, 0)]
	var b strings.Builder
	fmt.Fprintf(&b, "soak %s of %s:", clock(s.At), clock(r.Duration))
	cols := soakColumns(s.Broker != nil)
	for i, c := range sampleCells(s, prev) {
		fmt.Fprintf(&b, " %s %s", strings.ToLower(cols[i]), c)
	}
	if s.Error != "" {
		fmt.Fprintf(&b, " (%s)", s.Error)
	}
	fmt.Fprintln(w, b.String())
}

// soakTableRows is how many sample rows the table shows at most: the
// samples are in the CSV and JSON files; the table shows the shape.
const soakTableRows = 13

// WriteSoakTable writes r for a reader: the run, samples through it, the
// trend of every figure after the warm-up, the lateness beside the floor,
// and the goals.
func WriteSoakTable(w io.Writer, r *SoakReport) error {
	fmt.Fprintf(w, "kdelay bench soak on %s, %s, delivery %s\n", r.Broker, r.Runner, r.Delivery)
	fmt.Fprintf(w, "Load %d records/s, delays %s to %s (log-uniform), for %s, sampled every %s, warm-up %s; run took %s\n",
		r.Rate, r.MinDelay, r.MaxDelay, r.Duration, r.Interval, r.Warmup, r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "Machine %d CPUs (%s), GOMAXPROCS %d, %s, steal %s\n", r.Machine.CPUs, r.Machine.Model, r.Machine.GOMAXPROCS, r.Machine.Go, percent(r.Machine.Steal))
	if r.Warmup < r.MaxDelay {
		fmt.Fprintf(w, "The warm-up is shorter than the longest delay: deliveries, and the memory that goes with them, ramp up until %s into the run, and that counts as growth; lengthen --duration or shorten --max-delay\n", r.MaxDelay)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "The run ended early: %s\n", r.Error)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	writeSoakSamples(tw, r.Samples, r.Embedded)
	writeTrends(tw, r.Trends)
	fmt.Fprintf(tw, "LATENESS       \t%s\tSENT\tDELIVERED\tLOST\tDUPS\tEARLY\tP50 ms\tP90 ms\tP99 ms\tP99.9 ms\tMAX ms\tPER S\t\n", padRight("GROUP", len(GroupDueLater)))
	for _, g := range r.Groups {
		fmt.Fprintf(tw, "%-15s\t%-*s\t%s\n", "", len(GroupDueLater), g.Name, latenessCells(g))
	}
	fmt.Fprintln(tw)
	writeGoals(tw, r.Goals)
	return tw.Flush()
}

func writeSoakSamples(w io.Writer, samples []SoakSample, embedded bool) {
	fmt.Fprintf(w, "AT     \t%s\t\n", strings.Join(soakColumns(embedded), "\t"))
	step := max(1, (len(samples)+soakTableRows-2)/(soakTableRows-1))
	for i, s := range samples {
		if i%step != 0 && i != len(samples)-1 {
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t\n", clock(s.At), strings.Join(sampleCells(s, samples[max(i-1, 0)]), "\t"))
	}
	fmt.Fprintln(w)
}

func writeTrends(w io.Writer, trends []Trend) {
	const head = "AFTER WARM-UP"
	width := len(head)
	for _, t := range trends {
		width = max(width, len(trendLabel(t)))
	}
	fmt.Fprintf(w, "%s\tSAMPLES\tFIRST\tLAST\tMIN\tMAX\tPER HOUR\t± NOISE\t\n", padRight(head, width))
	for _, t := range trends {
		f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", padRight(trendLabel(t), width), t.Samples,
			f(t.First), f(t.Last), f(t.Min), f(t.Max), f(t.PerHour), f(t.Noise))
	}
	fmt.Fprintln(w)
}

func trendLabel(t Trend) string {
	if t.Unit == "" {
		return t.Name
	}
	return t.Name + " (" + t.Unit + ")"
}

// WriteSoakJSON writes r as indented JSON: every sample and figure.
func WriteSoakJSON(w io.Writer, r *SoakReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteSoakCSV writes r's samples, one row each, in raw units: bytes,
// seconds, milliseconds; -1 where a figure was not read, and the broker's
// columns empty on a cluster.
func WriteSoakCSV(w io.Writer, r *SoakReport) error {
	cw := csv.NewWriter(w)
	head := []string{"at_s"}
	for _, proc := range []string{"", "broker_"} {
		for _, col := range []string{"rss_bytes", "heap_inuse_bytes", "heap_live_bytes", "goroutines", "open_fds", "tcp_conns", "cpu_s"} {
			head = append(head, proc+col)
		}
	}
	_ = cw.Write(append(head, "broker_log_bytes", "sent", "arrived", "late_n", "late_p50_ms", "late_p99_ms", "late_max_ms",
		"floor_n", "floor_p50_ms", "floor_p99_ms", "floor_max_ms", "error"))
	for _, s := range r.Samples {
		row := append([]string{strconv.FormatFloat(s.At.Seconds(), 'f', 3, 64)}, procCSV(&s.Serve)...)
		row = append(row, procCSV(s.Broker)...)
		row = append(row, count(s.BrokerLog), count(s.Sent), count(s.Arrived))
		for _, win := range []Window{s.Late, s.Floor} {
			row = append(row, count(win.N), ms(win.P50), ms(win.P99), ms(win.Max))
		}
		_ = cw.Write(append(row, s.Error))
	}
	cw.Flush()
	return cw.Error()
}

// procCSV are a process's columns of WriteSoakCSV; empty for none.
func procCSV(p *ProcSample) []string {
	if p == nil {
		return make([]string, 7)
	}
	cpu := "-1"
	if p.CPU >= 0 {
		cpu = strconv.FormatFloat(p.CPU.Seconds(), 'f', 3, 64)
	}
	return []string{count(p.RSS), count(p.HeapInuse), count(p.HeapLive), count(p.Goroutines), count(p.OpenFDs), count(p.TCPConns), cpu}
}
