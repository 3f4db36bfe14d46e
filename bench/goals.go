package bench

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// checkGoals checks a report against kdelay's goals. Lateness goals are checked
// on the steady records in exact mode: the burst measures a queue, not a
// wake-up.
func checkGoals(r *Report) []Goal {
	var out []Goal
	exact, hasExact := r.Mode(forwarder.ModeExact)
	if hasExact {
		out = append(out, latenessGoals(exact)...)
	}
	out = append(out, countGoals(r)...)
	if poll, ok := r.Mode(forwarder.ModePoll); ok && hasExact {
		e, _ := exact.Group(GroupSteady)
		p, _ := poll.Group(GroupSteady)
		out = append(out, atLeast("poll p99 ÷ exact p99", ratioOrZero(float64(p.P99), float64(e.P99)), 10))
	}
	if c := r.Copy; c != nil {
		out = append(out, atLeast("throughput ÷ raw copy", c.Ratio, 0.7))
	}
	if s := r.Scale; s != nil {
		out = append(out, scaleGoals(s)...)
	}
	if c := r.Commands; c != nil {
		out = append(out, commandGoals(c)...)
	}
	return out
}

func latenessGoals(m ModeResult) []Goal {
	st, ok := m.Group(GroupSteady)
	if !ok {
		return nil
	}
	out := []Goal{
		within("p50 lateness", st.P50, 2*time.Millisecond),
		within("p99 lateness", st.P99, 10*time.Millisecond),
		within("max lateness", st.Max, 100*time.Millisecond),
	}
	single, ok1 := m.Group(GroupSingleHop)
	multi, ok2 := m.Group(GroupMultiHop)
	if ok1 && ok2 {
		out = append(out, within("multi-hop p99 − single-hop p99", multi.P99-single.P99, 5*time.Millisecond))
	}
	return out
}

// countGoals: no record early and none lost, in any mode. Steady and burst
// hold every record once.
func countGoals(r *Report) []Goal {
	var early, lost int64
	for _, m := range r.Modes {
		for _, name := range []string{GroupSteady, GroupBurst} {
			g, _ := m.Group(name)
			early += g.Early
			lost += g.Lost
		}
	}
	if r.Scale != nil {
		early += r.Scale.BurstLateness.Early
		lost += r.Scale.BurstLateness.Lost
	}
	if c := r.Commands; c != nil {
		for _, g := range append(c.None, c.Live...) {
			early += g.Early
			lost += g.Lost
		}
	}
	return []Goal{
		{Name: "early records", Want: "0", Got: strconv.FormatInt(early, 10), Met: early == 0},
		{Name: "lost records", Want: "0", Got: strconv.FormatInt(lost, 10), Met: lost == 0},
	}
}

// scaleGoals: a burst is delivered within seconds in bounded memory, and
// pending records cost neither memory nor CPU. The peak is a goal only when
// the forwarder ran as its own process: the default max-buffered-bytes is
// sized for a 128 MiB container (forwarder/pool.go).
func scaleGoals(s *ScaleResult) []Goal {
	grew := s.RSSPending - s.RSSEmpty
	goals := []Goal{
		within(fmt.Sprintf("burst of %d delivered", s.Burst), s.BurstDrain, 10*time.Second),
		{
			Name: fmt.Sprintf("RSS with %d pending − RSS with none", s.Pending), Want: "≤ 32MB",
			Got: megabytes(grew), Met: grew <= 32<<20,
		},
		{
			Name: fmt.Sprintf("idle CPU with %d pending", s.Pending), Want: "< 0.5% of a core",
			Got: strconv.FormatFloat(s.IdleCPU*100, 'f', 2, 64) + "%", Met: s.IdleCPU < 0.005,
		},
	}
	if u := s.Usage; u.Measured && !u.Shared {
		goals = append(goals, Goal{Name: "peak RSS, burst included", Want: "≤ 128MB", Got: megabytes(u.PeakRSS), Met: u.PeakRSS <= 128<<20})
	}
	return goals
}

// commandGoals: live commands cost memory per command, not lateness, and
// load in seconds.
func commandGoals(c *CommandsResult) []Goal {
	steady := func(gs []Group) Group {
		for _, g := range gs {
			if g.Name == GroupSteady {
				return g
			}
		}
		return Group{}
	}
	none, live := steady(c.None), steady(c.Live)
	perCommand := c.PerCommand()
	return []Goal{
		within(fmt.Sprintf("p99 lateness, %d live − none", c.Commands), live.P99-none.P99, 5*time.Millisecond),
		{
			Name: "RSS per live command", Want: "≤ 300 B",
			Got: strconv.FormatFloat(perCommand, 'f', 0, 64) + " B", Met: perCommand <= 300,
		},
		within(fmt.Sprintf("loading %d commands", c.Commands), c.Load(), 10*time.Second),
	}
}

func within(name string, got, limit time.Duration) Goal {
	return Goal{Name: name, Want: "≤ " + limit.String(), Got: millis(got), Met: got <= limit}
}

func atLeast(name string, got, limit float64) Goal {
	return Goal{Name: name, Want: "≥ " + strconv.FormatFloat(limit, 'g', -1, 64), Got: strconv.FormatFloat(got, 'f', 2, 64), Met: got >= limit}
}

// ratioOrZero is a ÷ b, or 0 when b is.
func ratioOrZero(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// millis writes a duration in milliseconds with microsecond precision:
// "1.234ms".
func millis(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

func megabytes(b int64) string {
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + "MB"
}
