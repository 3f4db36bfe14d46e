package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBenchBadWorkload: a workload kdelay bench cannot run is a mistake in
// the command line, exit 2 with the reason, as for serve, and it is found
// before any broker starts.
func TestBenchBadWorkload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // the first line kdelay prints
	}{
		{[]string{"bench", "--copy", "-5"}, "kdelay: copy: -5 is negative; use 0 to leave that part out"},
		{[]string{"bench", "scale", "--pending", "-1"}, "kdelay: pending: -1 is negative; give a number of records such as 100000"},
		{[]string{"bench", "commands", "--commands", "-1"}, "kdelay: commands: -1 is negative; give a number of live cancels such as 1000000"},
		{[]string{"bench", "schedules", "--schedules", "10", "--timed", "20"},
			"kdelay: schedules 10, timed 20: time at least one, and no more than there are schedules, e.g. --schedules 100000 --timed 100"},
		{[]string{"bench", "schedules", "--every", "1500ms"}, "kdelay: every: 1.5s; use whole seconds, e.g. 1s"},
		{[]string{"bench", "schedules", "--in-process"},
			"kdelay: --in-process does not apply to schedules: it measures the memory of a kdelay serve process of its own"},
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
			if code != 2 || first != tt.want {
				t.Errorf("exit %d, printed %q, want exit 2 and first line %q", code, out.String(), tt.want)
			}
		})
	}
}
