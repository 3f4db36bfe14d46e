package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print kdelay's version, the commit it was built from and the Go version",
		Args:  usageArgs(cobra.NoArgs),
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "kdelay", version())
		},
	}
}

// version says what this binary was built from; see describe.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (built without module support)"
	}
	return describe(info)
}

// describe says what a binary was built from, so that a bug report names
// the exact source:
//
//	v1.2.3, go1.26.8
//	(devel), commit 63b35112e964a3781081c20261798fc06ac2c388 (2026-11-23T14:50:41Z, modified), go1.26.8
//
// The module version alone does not: a build in a checkout says "(devel)"
// (since Go 1.24, a pseudo-version with a short hash). The vcs.* settings
// that go build records in a git checkout, unless -buildvcs=false, give the
// full commit, its time and whether the tree had uncommitted changes.
func describe(info *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	parts := []string{info.Main.Version}
	if info.Main.Version == "" {
		parts[0] = "(devel)" // a test binary has no main module version
	}
	if rev := settings["vcs.revision"]; rev != "" {
		var about []string
		if t := settings["vcs.time"]; t != "" {
			about = append(about, t)
		}
		if settings["vcs.modified"] == "true" {
			about = append(about, "modified")
		}
		commit := "commit " + rev
		if len(about) > 0 {
			commit += " (" + strings.Join(about, ", ") + ")"
		}
		parts = append(parts, commit)
	} else if parts[0] == "(devel)" {
		parts = append(parts, "no commit recorded (built with -buildvcs=false or outside a git checkout)")
	}
	return strings.Join(append(parts, info.GoVersion), ", ")
}
