package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestFlagSuggestions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string // the whole first line kdelay prints
	}{
		{"swapped letters", []string{"serve", "--brokres", "x"}, "kdelay: unknown flag: --brokres; did you mean --brokers?"},
		{"with =value", []string{"send", "--targte=orders"}, "kdelay: unknown flag: --targte; did you mean --target?"},
		{"a letter missing", []string{"serve", "--chek-interval", "1s"}, "kdelay: unknown flag: --chek-interval; did you mean --check-interval?"},
		{"a prefix", []string{"serve", "--retention-head", "1h"}, "kdelay: unknown flag: --retention-head; did you mean --retention-headroom?"},
		{"an abbreviation", []string{"serve", "--lis", "x"}, "kdelay: unknown flag: --lis; did you mean --listen?"},
		{"two names as close", []string{"send", "--it", "x"}, "kdelay: unknown flag: --it; did you mean --at or --id?"},
		{"only the command's own flags", []string{"tail", "--check-interval", "1s", "t"}, "kdelay: unknown flag: --check-interval"},
		{"nothing close", []string{"serve", "--frobnicate"}, "kdelay: unknown flag: --frobnicate"},
		{"unknown shorthand", []string{"serve", "-q"}, `kdelay: unknown shorthand flag: 'q' in -q`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := newRoot()
			var out bytes.Buffer
			root.SetArgs(tt.args)
			root.SetOut(&out)
			root.SetErr(&out)
			code := exitCode(root.Execute(), &out)
			first, _, _ := strings.Cut(out.String(), "\n")
			if code != 2 || first != tt.want {
				t.Errorf("kdelay %s: exit %d, printed:\n%s\nwant exit 2 and first line\n%s", strings.Join(tt.args, " "), code, out.String(), tt.want)
			}
		})
	}
}
