package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// TestCheckGoals: each goal is checked on the figures it is about, its
// limit is inclusive where it says ≤ or ≥, and a goal whose figures the
// run did not measure is left out rather than failed.
func TestCheckGoals(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	steady := func(p50, p99, max time.Duration) Group {
		return Group{Name: GroupSteady, Sent: 10, Delivered: 10, P50: p50, P99: p99, Max: max}
	}
	hops := func(single, multi time.Duration) []Group {
		return []Group{{Name: GroupSingleHop, P99: single}, {Name: GroupMultiHop, P99: multi}}
	}
	mode := func(m forwarder.Mode, groups ...Group) ModeResult { return ModeResult{Mode: m, Groups: groups} }
	scale := func(grew int64, idle float64, drain time.Duration) *ScaleResult {
		return &ScaleResult{Pending: 1000, RSSEmpty: 10 << 20, RSSPending: 10<<20 + grew, IdleCPU: idle, Burst: 500, BurstDrain: drain}
	}
	type want struct {
		got string
		met bool
	}
	tests := []struct {
		name  string
		rep   Report
		names []string        // every goal, in order
		want  map[string]want // some of them
	}{
		{
			name: "lateness exactly at the limits is met",
			rep:  Report{Modes: []ModeResult{mode(forwarder.ModeExact, append(hops(3*ms, 8*ms), steady(2*ms, 10*ms, 100*ms))...)}},
			names: []string{"p50 lateness", "p99 lateness", "max lateness", "multi-hop p99 − single-hop p99",
				"early records", "lost records"},
			want: map[string]want{
				"p50 lateness": {"2.000ms", true}, "p99 lateness": {"10.000ms", true}, "max lateness": {"100.000ms", true},
				"multi-hop p99 − single-hop p99": {"5.000ms", true}, "early records": {"0", true}, "lost records": {"0", true},
			},
		},
		{
			name: "a microsecond over a limit is missed",
			rep: Report{Modes: []ModeResult{mode(forwarder.ModeExact,
				append(hops(3*ms, 8*ms+µs), steady(2*ms+µs, 10*ms+µs, 100*ms+µs))...)}},
			want: map[string]want{
				"p50 lateness": {"2.001ms", false}, "p99 lateness": {"10.001ms", false}, "max lateness": {"100.001ms", false},
				"multi-hop p99 − single-hop p99": {"5.001ms", false},
			},
		},
		{
			name: "poll p99 ten times exact's is met; the ratio needs both modes",
			rep: Report{Modes: []ModeResult{
				mode(forwarder.ModeExact, steady(ms, 10*ms, 20*ms)), mode(forwarder.ModePoll, steady(50*ms, 100*ms, 120*ms)),
			}},
			names: []string{"p50 lateness", "p99 lateness", "max lateness", "early records", "lost records", "poll p99 ÷ exact p99"},
			want:  map[string]want{"poll p99 ÷ exact p99": {"10.00", true}},
		},
		{
			name:  "poll alone: no lateness goals, records still counted",
			rep:   Report{Modes: []ModeResult{mode(forwarder.ModePoll, steady(50*ms, 100*ms, 120*ms))}},
			names: []string{"early records", "lost records"},
		},
		{
			name: "early and lost records of steady, burst and the scale burst add up, in every mode",
			rep: Report{
				Modes: []ModeResult{
					mode(forwarder.ModeExact, Group{Name: GroupSteady, Early: 1, Lost: 2}, Group{Name: GroupBurst, Lost: 3},
						Group{Name: "level=1s", Early: 100, Lost: 100}), // counted in steady already
					mode(forwarder.ModePoll, Group{Name: GroupBurst, Early: 4}),
				},
				Scale: &ScaleResult{BurstLateness: Group{Early: 5, Lost: 6}, IdleCPU: 0},
			},
			want: map[string]want{"early records": {"10", false}, "lost records": {"11", false}},
		},
		{
			name:  "throughput at 0.7 of a raw copy is met",
			rep:   Report{Copy: &CopyResult{Ratio: 0.7}},
			names: []string{"early records", "lost records", "throughput ÷ raw copy"},
			want:  map[string]want{"throughput ÷ raw copy": {"0.70", true}},
		},
		{
			name: "scale within its limits",
			rep:  Report{Scale: scale(32<<20, 0.0049, 10*time.Second)},
			names: []string{"early records", "lost records", "burst of 500 delivered",
				"RSS with 1000 pending − RSS with none", "idle CPU with 1000 pending"},
			want: map[string]want{
				"burst of 500 delivered":                {"10000.000ms", true},
				"RSS with 1000 pending − RSS with none": {"32.0MB", true},
				"idle CPU with 1000 pending":            {"0.49%", true},
			},
		},
		{
			name: "a burst's peak RSS within a 128 MiB container, the forwarder measured on its own",
			rep: Report{Scale: &ScaleResult{Pending: 1000, Burst: 500,
				Usage: Usage{PeakRSS: 128 << 20, Measured: true}}},
			want: map[string]want{"peak RSS, burst included": {"128.0MB", true}},
		},
		{
			name: "a burst's peak RSS past it",
			rep: Report{Scale: &ScaleResult{Pending: 1000, Burst: 500,
				Usage: Usage{PeakRSS: 128<<20 + 1<<19, Measured: true}}},
			want: map[string]want{"peak RSS, burst included": {"128.5MB", false}},
		},
		{
			name: "no RSS goal when the forwarder shares the benchmark's process",
			rep: Report{Scale: &ScaleResult{Pending: 1000, Burst: 500,
				Usage: Usage{PeakRSS: 300 << 20, Measured: true, Shared: true}}},
			names: []string{"early records", "lost records", "burst of 500 delivered",
				"RSS with 1000 pending − RSS with none", "idle CPU with 1000 pending"},
		},
		{
			name: "scale over its limits",
			rep:  Report{Scale: scale(32<<20+1<<19, 0.005, 10*time.Second+ms)},
			want: map[string]want{
				"burst of 500 delivered":                {"10001.000ms", false},
				"RSS with 1000 pending − RSS with none": {"32.5MB", false},
				"idle CPU with 1000 pending":            {"0.50%", false},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			goals := checkGoals(&tt.rep)
			var names []string
			for _, g := range goals {
				names = append(names, g.Name)
			}
			if tt.names != nil && !slices.Equal(names, tt.names) {
				t.Errorf("goals %q, want %q", names, tt.names)
			}
			for name, w := range tt.want {
				i := slices.Index(names, name)
				if i < 0 {
					t.Errorf("no goal %q among %q", name, names)
					continue
				}
				if g := goals[i]; g.Got != w.got || g.Met != w.met {
					t.Errorf("%s: got %s, met %v; want got %s, met %v", name, g.Got, g.Met, w.got, w.met)
				}
			}
		})
	}
}

// TestGoalWants: the limits a reader sees are the ones checked.
func TestGoalWants(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	rep.Scale = &ScaleResult{Pending: 1, Burst: 1}
	want := map[string]string{
		"p50 lateness": "≤ 2ms", "p99 lateness": "≤ 10ms", "max lateness": "≤ 100ms",
		"poll p99 ÷ exact p99": "≥ 10", "throughput ÷ raw copy": "≥ 0.7", "early records": "0", "lost records": "0",
		"burst of 1 delivered": "≤ 10s", "RSS with 1 pending − RSS with none": "≤ 32MB", "idle CPU with 1 pending": "< 0.5% of a core",
	}
	goals := checkGoals(rep)
	if len(goals) != len(want) {
		t.Errorf("%d goals, want %d: %+v", len(goals), len(want), goals)
	}
	for _, g := range goals {
		if g.Want != want[g.Name] {
			t.Errorf("%s: want %q, expected %q", g.Name, g.Want, want[g.Name])
		}
	}
}
