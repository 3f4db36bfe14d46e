package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteBenchfmt writes r in the Go benchmark format, so that
// benchstat compares two runs (benchstat old.txt new.txt) or the two modes
// of one (benchstat -col /mode run.txt). Each line is a name, an iteration
// count (the records measured), then value-unit pairs; units ending in -ns
// are nanoseconds, which benchstat shows in seconds. Configuration lines
// ("key: value") come first, as `go test -bench` writes them.
//
//	BenchmarkLateness/level=1s/mode=exact 200 1016000 p50-ns 1370000 p99-ns ...
func WriteBenchfmt(w io.Writer, r *Report) error {
	var b strings.Builder
	configLines := [][2]string{
		{"goos", r.Machine.OS}, {"goarch", r.Machine.Arch}, {"pkg", "github.com/kdelay/kdelay/bench"},
		{"cpu", r.Machine.Model}, {"broker", r.Broker}, {"forwarder", r.Runner},
		{"delivery", string(r.Delivery)},
	}
	for _, kv := range configLines {
		if kv[1] != "" {
			fmt.Fprintf(&b, "%s: %s\n", kv[0], kv[1])
		}
	}
	for _, m := range r.Modes {
		for _, g := range m.Groups {
			b.WriteString(latenessLine(string(m.Mode), g))
		}
		if u := m.Usage; u.Measured {
			b.WriteString(line("Forwarder/mode="+string(m.Mode), 1, u.CPU.Nanoseconds(), "cpu-ns", u.PeakRSS, "peak-rss-B"))
		}
	}
	if c := r.Copy; c != nil {
		// One line per run: benchstat takes the median and the spread.
		for _, v := range c.CopyRuns {
			b.WriteString(line("Throughput/path=raw-copy", c.Records, v, "records/s"))
		}
		for _, v := range c.KdelayRuns {
			b.WriteString(line("Throughput/path=kdelay", c.Records, v, "records/s"))
		}
	}
	if s := r.Scale; s != nil {
		b.WriteString(scaleLines(s))
	}
	if c := r.Commands; c != nil {
		live := "live=" + strconv.Itoa(c.Commands)
		for _, g := range c.None {
			b.WriteString(latenessLine("exact/commands=none", g))
		}
		for _, g := range c.Live {
			b.WriteString(latenessLine("exact/commands="+live, g))
		}
		b.WriteString(line("Commands/"+live, 1, c.RSSNone, "rss-none-B", c.RSSLive, "rss-live-B",
			c.PerCommand(), "rss-B/command", c.Load().Nanoseconds(), "load-ns"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// latenessLine is one group's lateness in one mode.
func latenessLine(mode string, g Group) string {
	return line("Lateness/"+subName(g.Name)+"/mode="+mode, int(g.Delivered),
		g.P50.Nanoseconds(), "p50-ns", g.P90.Nanoseconds(), "p90-ns", g.P99.Nanoseconds(), "p99-ns",
		g.P999.Nanoseconds(), "p99.9-ns", g.Max.Nanoseconds(), "max-ns",
		g.Early, "early", g.Lost, "lost", g.Duplicates, "dups")
}

// subName turns a group name into key=value for benchstat: "level=1s"
// stays, "steady" becomes "group=steady".
func subName(group string) string {
	if strings.Contains(group, "=") {
		return group
	}
	return "group=" + group
}

func scaleLines(s *ScaleResult) string {
	pending := "Scale/pending=" + strconv.Itoa(s.Pending)
	burst := "Scale/burst=" + strconv.Itoa(s.Burst)
	return line(pending, 1, s.RSSEmpty, "rss-empty-B", s.RSSPending, "rss-pending-B", s.IdleCPU, "idle-cpu-cores") +
		line(burst, s.Burst, s.BurstDrain.Nanoseconds(), "drain-ns", s.BurstLateness.P50.Nanoseconds(), "p50-ns",
			s.BurstLateness.P99.Nanoseconds(), "p99-ns", s.BurstLateness.Lost, "lost")
}

// line writes "Benchmark<name> <iterations> <value> <unit> ...". pairs
// alternate values (integers or floats) and units, which must hold no
// spaces.
func line(name string, iterations int, pairs ...any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Benchmark%s %d", strings.ReplaceAll(name, " ", "_"), max(iterations, 1))
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(&b, " %s %s", figure(pairs[i]), pairs[i+1])
	}
	b.WriteByte('\n')
	return b.String()
}

// figure writes an integer as it is and a float without an exponent.
func figure(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	panic(fmt.Sprintf("bench: figure of %T", v)) // a bug in a caller of line
}
