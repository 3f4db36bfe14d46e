package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

func TestConfigWithDefaults(t *testing.T) {
	t.Parallel()
	t.Run("both modes in process on the default workload", func(t *testing.T) {
		t.Parallel()
		c := Config{}.WithDefaults()
		if _, ok := c.Runner.(InProcess); !ok || !slices.Equal(c.Modes, []forwarder.Mode{forwarder.ModeExact, forwarder.ModePoll}) {
			t.Errorf("runner %v, modes %v; want in-process, exact then poll", c.Runner, c.Modes)
		}
		if want := DefaultWorkload(levels.Default()); !slices.Equal(c.Workload.Levels, want.Levels) || c.Workload.Copy != want.Copy {
			t.Errorf("workload %+v, want the default %+v", c.Workload, want)
		}
	})
	t.Run("a running forwarder has one mode, exact", func(t *testing.T) {
		t.Parallel()
		c := Config{Runner: Running{Topics: kdelay.Topics{Prefix: "kdelay"}}}.WithDefaults()
		if !slices.Equal(c.Modes, []forwarder.Mode{forwarder.ModeExact}) {
			t.Errorf("modes %v, want exact only", c.Modes)
		}
	})
	t.Run("a workload that is set is kept, zero counts and all", func(t *testing.T) {
		t.Parallel()
		w := Workload{Burst: 10, BurstLead: time.Second}
		if c := (Config{Workload: w}).WithDefaults(); len(c.Workload.Levels) != 0 || c.Workload.Burst != 10 || c.Workload.Copy != 0 {
			t.Errorf("workload %+v, want %+v", c.Workload, w)
		}
	})
}

// TestConfigValidate: every mistake is reported, each with its fix.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want []string // parts of the error; none for a valid Config
	}{
		{"defaults", Config{}, nil},
		{"unknown mode", Config{Modes: []forwarder.Mode{"fast"}}, []string{`modes: "fast" is not a mode; use "exact" or "poll"`}},
		{"two modes of a running forwarder", Config{Runner: Running{}, Modes: []forwarder.Mode{forwarder.ModeExact, forwarder.ModePoll}},
			[]string{"a running forwarder has one mode"}},
		{"unknown level and negative counts", Config{Workload: Workload{Levels: []string{"3s"}, PerLevel: -1, Spread: time.Second, Burst: -5}},
			[]string{`levels: "3s" is not one of the forwarder's levels`, "per-level: -1 is negative; use 0 to leave that part out", "burst: -5 is negative"}},
		{"records without a spread", Config{Workload: Workload{Levels: []string{"1s"}, PerLevel: 5}}, []string{"spread: must be positive"}},
		{"a rate without a time", Config{Workload: Workload{Rate: 10}}, []string{"rate-for: 0s; say how long to send 10 records/s"}},
		{"negative delay", Config{Workload: Workload{Delays: []time.Duration{-time.Second}}}, []string{"delays: -1s is negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.WithDefaults().validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("error %v, want none", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestServeFlagsTheBenchmarkSets: a --serve-flag for a setting the benchmark
// makes itself (one that would win over its own, as --delivery did, the
// sweep then waiting for groups that never formed) is refused, naming what
// to use; others pass.
func TestServeFlagsTheBenchmarkSets(t *testing.T) {
	t.Parallel()
	err := checkServeFlags([]string{"--delivery=exactly-once", "--levels", "1s", "--max-buffered-bytes=512MiB", "--admin=127.0.0.1:9999"})
	if err == nil {
		t.Fatal("--serve-flag=--delivery=exactly-once accepted")
	}
	for _, want := range []string{"--delivery=exactly-once", "kdelay bench's --delivery", "kdelay bench's --levels"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "max-buffered-bytes") || strings.Contains(err.Error(), "admin") {
		t.Errorf("error %q refuses a flag the benchmark leaves to serve", err)
	}
	if err := checkServeFlags([]string{"--max-buffered-bytes=512MiB", "1s"}); err != nil {
		t.Errorf("checkServeFlags = %v, want nil", err)
	}
}
