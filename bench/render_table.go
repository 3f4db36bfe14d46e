package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// WriteTable writes r as aligned tables for a reader: lateness per group
// and mode, what the forwarder used, the throughput comparison, the scale
// figures, and the goals. No line looks like a benchstat configuration
// line ("key: value"), so the tables and WriteBenchfmt's lines can share a
// file that benchstat reads.
func WriteTable(w io.Writer, r *Report) error {
	fmt.Fprintf(w, "kdelay bench on %s, forwarder %s", r.Broker, r.Runner)
	if r.Delivery != "" {
		fmt.Fprintf(w, ", delivery %s", r.Delivery)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Machine %d CPUs (%s), GOMAXPROCS %d, %s, steal %s, run took %s\n\n",
		r.Machine.CPUs, r.Machine.Model, r.Machine.GOMAXPROCS, r.Machine.Go, percent(r.Machine.Steal), r.Elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(r.Modes) > 0 {
		writeLateness(tw, r.Modes)
		writeUsage(tw, r.Modes)
	}
	if c := r.Copy; c != nil {
		writeCopy(tw, c)
	}
	if s := r.Scale; s != nil {
		writeScale(tw, s)
	}
	if c := r.Commands; c != nil {
		writeCommands(tw, c)
	}
	writeGoals(tw, r.Goals)
	return tw.Flush()
}

func writeLateness(w io.Writer, modes []ModeResult) {
	width := len("GROUP")
	for _, m := range modes {
		for _, g := range m.Groups {
			width = max(width, len(g.Name))
		}
	}
	fmt.Fprintf(w, "MODE \t%s\tSENT\tDELIVERED\tLOST\tDUPS\tEARLY\tP50 ms\tP90 ms\tP99 ms\tP99.9 ms\tMAX ms\tPER S\t\n", padRight("GROUP", width))
	for _, m := range modes {
		for _, g := range m.Groups {
			fmt.Fprintf(w, "%-5s\t%-*s\t%s\n", m.Mode, width, g.Name, latenessCells(g))
		}
	}
	fmt.Fprintln(w)
}

// latenessCells are the columns of a lateness row after mode and group,
// tab-terminated for tabwriter.
func latenessCells(g Group) string {
	cells := []string{
		count(g.Sent), count(g.Delivered), count(g.Lost), count(g.Duplicates), count(g.Early),
		ms(g.P50), ms(g.P90), ms(g.P99), ms(g.P999), ms(g.Max), "",
	}
	if g.PerSecond > 0 {
		cells[len(cells)-1] = strconv.FormatFloat(g.PerSecond, 'f', 0, 64)
	}
	return strings.Join(cells, "\t") + "\t"
}

func writeUsage(w io.Writer, modes []ModeResult) {
	fmt.Fprintf(w, "FORWARDER\tCPU s\tPEAK RSS MB\tTOOK\t%s\t\n", padRight("MEASURED ON", 40))
	for _, m := range modes {
		u := m.Usage
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t\n", padRight(string(m.Mode), len("FORWARDER")), usageSeconds(u, u.CPU), usageMB(u, u.PeakRSS), m.Elapsed.Round(time.Second), padRight(measuredOn(u), 40))
	}
	fmt.Fprintln(w)
}

func writeCopy(w io.Writer, c *CopyResult) {
	const head = "THROUGHPUT (records all due)"
	fmt.Fprintf(w, "%s\tRECORDS\tMEDIAN /S\t%s\t\n", head, padRight("RUNS /S", 30))
	fmt.Fprintf(w, "%s\t%d\t%.0f\t%s\t\n", padRight("raw franz-go copy", len(head)), c.Records, c.Copy, padRight(rates(c.CopyRuns), 30))
	fmt.Fprintf(w, "%s\t%d\t%.0f\t%s\t\n", padRight("kdelay, exact mode", len(head)), c.Records, c.Kdelay, padRight(rates(c.KdelayRuns), 30))
	fmt.Fprintf(w, "%s\t\t%.2f\t%s\t\n\n", padRight("kdelay ÷ copy", len(head)), c.Ratio, padRight("", 30))
}

func rates(runs []float64) string {
	s := make([]string, len(runs))
	for i, r := range runs {
		s[i] = strconv.FormatFloat(r, 'f', 0, 64)
	}
	return strings.Join(s, " ")
}

func writeScale(w io.Writer, s *ScaleResult) {
	u := s.Usage
	rows := [][2]string{
		{"RSS with nothing pending", usageMB(u, s.RSSEmpty) + " MB"},
		{fmt.Sprintf("RSS with %d pending", s.Pending), usageMB(u, s.RSSPending) + " MB"},
		{"peak RSS while they were written", usageMB(u, s.PeakPending) + " MB"},
		{fmt.Sprintf("CPU while they wait, over %s", s.IdleFor), strconv.FormatFloat(s.IdleCPU*100, 'f', 2, 64) + "% of a core"},
		{fmt.Sprintf("burst of %d written in", s.Burst), s.BurstWritten.Round(time.Millisecond).String()},
		{"burst due after", s.BurstLead.Round(time.Millisecond).String()},
		{"burst all delivered after due", s.BurstDrain.Round(time.Millisecond).String()},
		{"burst lateness p50 / p99", ms(s.BurstLateness.P50) + " / " + ms(s.BurstLateness.P99) + " ms"},
		{"peak RSS, burst included", usageMB(u, u.PeakRSS) + " MB"},
		{"measured on", measuredOn(u)},
	}
	width := 0
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r[0]))
	}
	fmt.Fprintf(w, "%s\tVALUE\t\n", padRight("SCALE", width))
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t\n", padRight(r[0], width), r[1])
	}
	fmt.Fprintln(w)
}

func writeCommands(w io.Writer, c *CommandsResult) {
	u := c.Usage
	live := strconv.Itoa(c.Commands) + " live"
	fmt.Fprintf(w, "COMMANDS     \t%s\tSENT\tDELIVERED\tLOST\tDUPS\tEARLY\tP50 ms\tP90 ms\tP99 ms\tP99.9 ms\tMAX ms\tPER S\t\n", padRight("GROUP", len(GroupSteady)))
	for _, run := range []struct {
		name   string
		groups []Group
	}{{"none", c.None}, {live, c.Live}} {
		for _, g := range run.groups {
			fmt.Fprintf(w, "%-13s\t%-*s\t%s\n", run.name, len(GroupSteady), g.Name, latenessCells(g))
		}
	}
	fmt.Fprintln(w)
	rows := [][2]string{
		{"RSS with no command live", usageMB(u, c.RSSNone) + " MB"},
		{"RSS with " + live, usageMB(u, c.RSSLive) + " MB"},
		{"RSS per live command", strconv.FormatFloat(c.PerCommand(), 'f', 0, 64) + " B"},
		{"restart to ready, control topic empty", c.ReadyEmpty.Round(time.Millisecond).String()},
		{fmt.Sprintf("restart to ready, %d in it", c.Commands), c.ReadyLoaded.Round(time.Millisecond).String()},
		{"loading them took", c.Load().Round(time.Millisecond).String()},
		{"measured on", measuredOn(u)},
	}
	width := 0
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r[0]))
	}
	fmt.Fprintf(w, "%s\tVALUE\t\n", padRight("COMMANDS", width))
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\t\n", padRight(r[0], width), r[1])
	}
	fmt.Fprintln(w)
}

func writeGoals(w io.Writer, goals []Goal) {
	width := len("GOAL")
	for _, g := range goals {
		width = max(width, utf8.RuneCountInString(g.Name))
	}
	fmt.Fprintf(w, "%s\tWANT\tGOT\tMET\t\n", padRight("GOAL", width))
	for _, g := range goals {
		met := "no"
		if g.Met {
			met = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", padRight(g.Name, width), g.Want, g.Got, met)
	}
}

// padRight pads s with spaces to width runes, so that a right-aligned
// tabwriter column of text reads left-aligned.
func padRight(s string, width int) string {
	return s + strings.Repeat(" ", max(width-utf8.RuneCountInString(s), 0))
}
