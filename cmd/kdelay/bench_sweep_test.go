package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchSweepUsage: a sweep kdelay bench cannot run is a mistake in the
// command line, exit 2 with the reason, found before any broker starts.
func TestBenchSweepUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // the first line kdelay prints
	}{
		{[]string{"bench", "sweep", "--rates", "1000,0"}, "kdelay: rates: 0; use at least 1 record per second"},
		{[]string{"bench", "sweep", "--for", "5s", "--warmup", "5s"},
			"kdelay: for 5s, warmup 5s, interval 500ms: use positive durations, and a warm-up shorter than for"},
		{[]string{"bench", "sweep", "--in-process"},
			"kdelay: --in-process does not apply to sweep: it measures the memory and CPU of a kdelay serve process of its own"},
		{[]string{"bench", "sweep", "--running", "--brokers", "127.0.0.1:9092"},
			"kdelay: --running does not apply to sweep: it starts a fresh kdelay serve for each rate"},
		{[]string{"bench", "sweep", "--levels", "1x"}, "kdelay: --levels: "},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			root := newRoot()
			var out bytes.Buffer
			root.SetArgs(tt.args)
			root.SetOut(&out)
			root.SetErr(&out)
			code := exitCode(root.Execute(), &out)
			first, _, _ := strings.Cut(out.String(), "\n")
			if code != 2 || !strings.HasPrefix(first, tt.want) {
				t.Errorf("exit %d, printed %q, want exit 2 and first line %q", code, out.String(), tt.want)
			}
		})
	}
}
