package bench

import (
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestWriteTable(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := WriteTable(&out, sampleReport()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"Machine 2 CPUs (Test CPU @ 2GHz), GOMAXPROCS 2, go1.26, steal 0.10%, run took 9m0s",
		"exact  level=1s      200        200     0     0      0   1.100   1.100   3.200     3.200   3.201",
		"poll   steady        300        300     0     0      0  51.000  51.000  99.900    99.900  99.901",
		"throughput ÷ raw copy   ≥ 0.7     0.25   no",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table does not contain %q:\n%s", want, text)
		}
	}
	checkColumnsLineUp(t, text)
}

// checkColumnsLineUp: every row of a table is as wide as its header.
func checkColumnsLineUp(t *testing.T, text string) {
	t.Helper()
	for _, section := range strings.Split(text, "\n\n")[1:] {
		lines := strings.Split(strings.TrimRight(section, "\n"), "\n")
		for _, l := range lines[1:] {
			if utf8.RuneCountInString(l) != utf8.RuneCountInString(lines[0]) {
				t.Errorf("row %q is not as wide as its header %q", l, lines[0])
			}
		}
	}
}

// TestWriteTableSections: each part of a report has its table, with the
// figures a reader looks for, and a part the run did not measure has none.
func TestWriteTableSections(t *testing.T) {
	t.Parallel()
	unmeasured := sampleReport()
	unmeasured.Modes[0].Usage = Usage{}
	unmeasured.Modes[1].Usage = Usage{CPU: time.Second, PeakRSS: 300 << 20, Shared: true, Measured: true}
	unmeasured.Modes[0].Groups = append(unmeasured.Modes[0].Groups,
		Group{Name: GroupBurst, Sent: 10000, Delivered: 10000, PerSecond: 250000.4})
	unmeasured.Copy = nil
	scaleUnmeasured := sampleScale()
	scaleUnmeasured.Scale.Usage = Usage{}
	tests := []struct {
		name    string
		rep     *Report
		want    []string // regular expressions, each matching a line
		notWant []string
	}{
		{
			name: "a run: lateness, forwarder, throughput",
			rep:  sampleReport(),
			want: []string{
				`^kdelay bench on embedded kfake \(in the benchmark process\), forwarder child process: kdelay serve$`,
				`^MODE\s+GROUP\s+SENT\s+DELIVERED\s+LOST\s+DUPS\s+EARLY\s+P50 ms\s+P90 ms\s+P99 ms\s+P99\.9 ms\s+MAX ms\s+PER S$`,
				`^exact\s+delay=3m17s\s+100\s+100\s+0\s+0\s+0\s+1\.300\s+1\.300\s+4\.100\s+4\.100\s+4\.101\s*$`,
				`^exact\s+1\.50\s+40\.0\s+4m0s\s+forwarder process\s*$`,
				`^poll\s+1\.00\s+38\.0\s+4m0s\s+forwarder process\s*$`,
				`^raw franz-go copy\s+100000\s+400000\s+400000 380000 420000\s*$`,
				`^kdelay, exact mode\s+100000\s+100000\s+100000 90000 110000\s*$`,
				`^kdelay ÷ copy\s+0\.25\s*$`,
				`^p99 lateness\s+≤ 10ms\s+3\.900ms\s+yes$`,
			},
			notWant: []string{`^SCALE`},
		},
		{
			name: "usage not measured, shared with the broker, and a burst's rate",
			rep:  unmeasured,
			want: []string{
				`^exact\s+-\s+-\s+4m0s\s+not measured\s*$`,
				`^poll\s+1\.00\s+300\.0\s+4m0s\s+whole benchmark process, broker included\s*$`,
				`^exact\s+burst\s+10000\s+10000\s+0\s+0\s+0(\s+0\.000){5}\s+250000$`,
			},
			notWant: []string{`^THROUGHPUT`, `^SCALE`},
		},
		{
			name: "scale: memory, idle CPU and the big burst",
			rep:  sampleScale(),
			want: []string{
				`^Machine .*, steal unknown, run took 5m0s$`,
				`^RSS with nothing pending\s+20\.0 MB$`,
				`^RSS with 1000000 pending\s+50\.0 MB$`,
				`^peak RSS while they were written\s+60\.0 MB$`,
				`^CPU while they wait, over 30s\s+0\.50% of a core$`,
				`^burst of 1000000 written in\s+4\.2s$`,
				`^burst due after\s+30s$`,
				`^burst all delivered after due\s+2\.5s$`,
				`^burst lateness p50 / p99\s+2\.000 / 9\.000 ms$`,
				`^peak RSS, burst included\s+70\.0 MB$`,
				`^measured on\s+forwarder process$`,
			},
			notWant: []string{`^MODE`, `^FORWARDER`, `^THROUGHPUT`},
		},
		{
			name:    "scale without usage says so rather than print zeros",
			rep:     scaleUnmeasured,
			want:    []string{`^RSS with 1000000 pending\s+- MB$`, `^measured on\s+not measured$`},
			notWant: []string{`.* 0\.0 MB`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			if err := WriteTable(&out, tt.rep); err != nil {
				t.Fatal(err)
			}
			text := out.String()
			// Lines start with the padding of right-aligned columns.
			line := func(re string) *regexp.Regexp { return regexp.MustCompile(`(?m)^\s*` + strings.TrimPrefix(re, "^")) }
			for _, re := range tt.want {
				if !line(re).MatchString(text) {
					t.Errorf("no line matches %s in:\n%s", re, text)
				}
			}
			for _, re := range tt.notWant {
				if m := line(re).FindString(text); m != "" {
					t.Errorf("%q should not be in:\n%s", m, text)
				}
			}
			checkColumnsLineUp(t, text)
		})
	}
}

// TestRenderersNameNoTrackerIssue: what a user reads (table, benchmark
// lines, chart, JSON keys) speaks of goals, not of the tracker's issues.
func TestRenderersNameNoTrackerIssue(t *testing.T) {
	t.Parallel()
	renderers := map[string]func(io.Writer, *Report) error{
		"table": WriteTable, "benchfmt": WriteBenchfmt, "svg": WriteSVG, "json": WriteJSON,
	}
	issue := regexp.MustCompile(`(?i)\bissues?\b`)
	for name, render := range renderers {
		var out strings.Builder
		if err := render(&out, sampleReport()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m := issue.FindString(out.String()); m != "" {
			t.Errorf("%s output names %q:\n%s", name, m, out.String())
		}
	}
}
