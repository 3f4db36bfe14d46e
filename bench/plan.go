package bench

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kdelay/kdelay/levels"
)

// send is one record of the steady workload: written to the ingress at
// `at` after the workload starts and due delay after that; or, for the
// floor, produced straight to the target by a timer when due.
type send struct {
	at     time.Duration
	delay  time.Duration
	floor  bool
	groups []*lateness
}

// groups are the lateness groups of one mode, by name.
type groups map[string]*lateness

func (gs groups) get(name string) *lateness {
	g, ok := gs[name]
	if !ok {
		g = newLateness(name)
		gs[name] = g
	}
	return g
}

// summaries returns every group that had records sent, in the report's
// order.
func (gs groups) summaries() []Group {
	var out []Group
	for _, g := range gs {
		if g.sent > 0 {
			out = append(out, g.summary())
		}
	}
	slices.SortFunc(out, func(a, b Group) int { return compareNames(a.Name, b.Name) })
	return out
}

// groupOrder ranks group names: levels, delays and hops first, each by its
// number, then the aggregates.
var groupOrder = []string{"level=", "delay=", "hops=", GroupSingleHop, GroupMultiHop, GroupRate, GroupSteady, GroupBurst, GroupFloor}

func compareNames(a, b string) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra - rb
	}
	return cmp.Compare(number(a), number(b))
}

func rank(name string) int {
	return slices.IndexFunc(groupOrder, func(p string) bool { return strings.HasPrefix(name, p) })
}

// number is the delay or hop count after the "=" of a name, for ordering.
func number(name string) time.Duration {
	_, v, _ := strings.Cut(name, "=")
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	n, _ := strconv.Atoi(v)
	return time.Duration(n)
}

// plan lays out the steady workload: records per level and per delay at
// random times within Spread, each level record with a floor twin of the
// same delay, then the steady rate. It is sorted by send time.
func plan(w Workload, set levels.Set, seed uint64, gs groups) []send {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	spread := func() time.Duration { return time.Duration(rng.Int64N(int64(max(w.Spread, 1)))) }
	var sends []send
	for _, name := range w.Levels {
		l := set[slices.IndexFunc(set, func(l levels.Level) bool { return l.Name == name })]
		for range w.PerLevel {
			sends = append(sends,
				send{at: spread(), delay: l.Delay, groups: steadyGroups(gs, set, l.Delay, "level="+name, GroupSingleHop)},
				send{at: spread(), delay: l.Delay, floor: true, groups: []*lateness{gs.get(GroupFloor)}})
		}
	}
	for _, d := range w.Delays {
		for range w.PerDelay {
			sends = append(sends, send{at: spread(), delay: d, groups: steadyGroups(gs, set, d, "delay="+d.String())})
		}
	}
	for i := range rateCount(w) {
		at := time.Duration(i) * time.Second / time.Duration(w.Rate)
		sends = append(sends, send{at: at, delay: w.RateDelay, groups: steadyGroups(gs, set, w.RateDelay, GroupRate)})
	}
	slices.SortStableFunc(sends, func(a, b send) int { return cmp.Compare(a.at, b.at) })
	return sends
}

func rateCount(w Workload) int { return int(float64(w.Rate) * w.RateFor.Seconds()) }

// steadyGroups are the groups a steady record of the given delay counts in:
// its own, its hop count's, multi-hop when it hops more than once, and
// steady.
func steadyGroups(gs groups, set levels.Set, delay time.Duration, names ...string) []*lateness {
	hops, _ := set.Plan(delay)
	names = append(names, "hops="+strconv.Itoa(len(hops)), GroupSteady)
	if len(hops) > 1 {
		names = append(names, GroupMultiHop)
	}
	out := make([]*lateness, len(names))
	for i, n := range names {
		out[i] = gs.get(n)
	}
	return out
}
