package main

import (
	"debug/buildinfo"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	const rev = "63b35112e964a3781081c20261798fc06ac2c388"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "-compiler", Value: "gc"}, {Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-11-23T14:50:41Z"}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"go install of a tag", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			"v1.2.3, go1.26.8"},
		{"build in a clean checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261123145041-63b35112e964"}, Settings: vcs("false")},
			"v0.0.0-20261123145041-63b35112e964, commit " + rev + " (2026-11-23T14:50:41Z), go1.26.8"},
		{"build in a modified checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")},
			"(devel), commit " + rev + " (2026-11-23T14:50:41Z, modified), go1.26.8"},
		{"build with -buildvcs=false", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"(devel), no commit recorded (built with -buildvcs=false or outside a git checkout), go1.26.8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := describe(&tt.info); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// The binary prints what go build recorded in it: the same build info that
// `go version -m` shows.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := command(bin, t.TempDir(), args...).CombinedOutput()
		want := describe(info)
		if err != nil || !strings.Contains(string(out), "kdelay ") || !strings.HasSuffix(strings.TrimSpace(string(out)), want) {
			t.Errorf("kdelay %s: %v, printed %q; want a line ending in %q", strings.Join(args, " "), err, out, want)
		}
	}
}
