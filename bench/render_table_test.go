package bench

import (
	"io"
	"regexp"
	"strings"
	"testing"
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
	// Every row of a table is as wide as its header: the columns line up.
	for _, section := range strings.Split(text, "\n\n")[1:] {
		lines := strings.Split(strings.TrimRight(section, "\n"), "\n")
		for _, l := range lines[1:] {
			if utf8.RuneCountInString(l) != utf8.RuneCountInString(lines[0]) {
				t.Errorf("row %q is not as wide as its header %q", l, lines[0])
			}
		}
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
