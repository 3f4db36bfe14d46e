package bench

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/kdelay/kdelay/levels"
)

func planSetup(t *testing.T) (levels.Set, Workload) {
	t.Helper()
	set, err := levels.Parse([]string{"1s", "2s", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	return set, Workload{
		Levels: []string{"1s", "2s"}, PerLevel: 3,
		Delays: []time.Duration{3500 * time.Millisecond}, PerDelay: 2,
		Spread: time.Second,
		Rate:   10, RateFor: 500 * time.Millisecond, RateDelay: time.Second,
	}
}

// TestPlan: the steady workload has every record the Workload asks for, in
// the groups the report shows, a floor twin of each level record, and send
// times in order.
func TestPlan(t *testing.T) {
	t.Parallel()
	set, w := planSetup(t)
	gs := groups{}
	sends := plan(w, set, 1, gs)

	t.Run("records per group", func(t *testing.T) {
		counts := map[string]int{}
		for _, sd := range sends {
			for _, g := range sd.groups {
				counts[g.name]++
			}
		}
		want := map[string]int{
			"level=1s": 3, "level=2s": 3, GroupFloor: 6, GroupSingleHop: 6,
			"delay=3.5s": 2, "hops=2": 2, GroupMultiHop: 2, // 3.5s: 2s, then 1s, then 500ms held
			GroupRate: 5, "hops=1": 6 + 5, GroupSteady: 6 + 2 + 5,
		}
		if !maps.Equal(counts, want) {
			t.Errorf("records per group %v, want %v", counts, want)
		}
		if len(sends) != 6+6+2+5 {
			t.Errorf("%d sends, want 19", len(sends))
		}
	})

	t.Run("a floor twin per level record, of the same delay", func(t *testing.T) {
		delaysIn := func(g *lateness) []time.Duration {
			var out []time.Duration
			for _, sd := range sends {
				if slices.Contains(sd.groups, g) {
					out = append(out, sd.delay)
				}
			}
			slices.Sort(out)
			return out
		}
		if floor, level := delaysIn(gs[GroupFloor]), delaysIn(gs[GroupSingleHop]); !slices.Equal(floor, level) {
			t.Errorf("floor delays %v, level delays %v: want the same", floor, level)
		}
		for _, sd := range sends {
			if isFloor := slices.Contains(sd.groups, gs[GroupFloor]); sd.floor != isFloor || isFloor && len(sd.groups) != 1 {
				t.Errorf("send of %s in %d groups, floor %v: a floor record is produced by a timer and counts in the floor only",
					sd.delay, len(sd.groups), sd.floor)
			}
		}
	})

	t.Run("sent in order, within the spread, the rate evenly", func(t *testing.T) {
		if !slices.IsSortedFunc(sends, func(a, b send) int { return int(a.at - b.at) }) {
			t.Error("sends are not in order of their time")
		}
		var rate []time.Duration
		for _, sd := range sends {
			if sd.at < 0 || sd.at >= w.Spread {
				t.Errorf("send at %s, outside the spread [0, %s)", sd.at, w.Spread)
			}
			if slices.Contains(sd.groups, gs[GroupRate]) {
				rate = append(rate, sd.at)
			}
		}
		want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}
		if !slices.Equal(rate, want) {
			t.Errorf("rate records at %v, want every 100ms: %v", rate, want)
		}
	})

	t.Run("the seed makes the times repeatable", func(t *testing.T) {
		times := func(seed uint64) []time.Duration {
			var out []time.Duration
			for _, sd := range plan(w, set, seed, groups{}) {
				out = append(out, sd.at)
			}
			return out
		}
		if !slices.Equal(times(7), times(7)) {
			t.Error("two plans with seed 7 differ")
		}
		if slices.Equal(times(7), times(8)) {
			t.Error("plans with seeds 7 and 8 are the same")
		}
	})
}

// TestGroupOrder: the report lists levels, delays and hop counts by their
// number, not alphabetically, then the aggregates, the floor last.
func TestGroupOrder(t *testing.T) {
	t.Parallel()
	want := []string{
		"level=500ms", "level=1s", "level=10s", "level=1m0s",
		"delay=1.4s", "delay=7.3s", "delay=1m15s",
		"hops=1", "hops=2", "hops=10",
		GroupSingleHop, GroupMultiHop, GroupRate, GroupSteady, GroupBurst, GroupFloor,
	}
	gs := groups{}
	for _, name := range want {
		gs.get(name).sent = 1
	}
	gs.get("sent nothing") // left out of the report
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		names := slices.Clone(want)
		rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		slices.SortFunc(names, compareNames)
		if !slices.Equal(names, want) {
			t.Fatalf("sorted %q, want %q", names, want)
		}
	}
	var got []string
	for _, g := range gs.summaries() {
		got = append(got, g.Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("summaries %q, want %q", got, want)
	}
}
