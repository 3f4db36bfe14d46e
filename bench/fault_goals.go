package bench

import (
	"strconv"
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// rollMaxLateness is the most a record may be late through a rolling
// restart of kdelay serve processes.
const rollMaxLateness = time.Second

// faultGoals are the guarantees each scenario checks (docs/RELIABILITY.md,
// "The guarantees"): no record lost and none early, the system back within
// backTimeout after every fault, a rolling restart within rollMaxLateness
// late, and with exactly-once delivery no id
// delivered more often than the ingress holds it, at the read_committed
// reader. At-least-once promises duplicates: they are shown, and judged
// only against maxDup, a share of the ids sent, when it is above 0.
func faultGoals(scenarios []FaultResult, delivery forwarder.Delivery, backTimeout time.Duration, maxDup float64) []Goal {
	var goals []Goal
	for _, s := range scenarios {
		name := s.Scenario + ": "
		goals = append(goals,
			Goal{Name: name + "lost records", Want: "0", Got: strconv.FormatInt(s.Lost, 10), Met: s.Lost == 0},
			Goal{Name: name + "early records", Want: "0", Got: strconv.FormatInt(s.Early, 10), Met: s.Early == 0},
		)
		if len(s.Faults) > 0 {
			goals = append(goals, backGoal(name+"faults back within "+backTimeout.String(), s.Faults))
		}
		if s.Scenario == ScenarioRoll && s.Error == "" {
			// A rolling deploy is routine: it should cost no more than a
			// second of lateness (issue 21), beside the floor's own.
			goals = append(goals, Goal{
				Name: name + "max lateness", Want: "≤ " + rollMaxLateness.String(),
				Got: s.All.Max.Round(time.Millisecond).String(), Met: s.All.Max <= rollMaxLateness,
			})
		}
		if delivery != forwarder.ExactlyOnce && maxDup > 0 {
			share := float64(s.AddedIDs) / float64(max(s.Sent, 1))
			goals = append(goals, Goal{
				Name: name + "ids kdelay delivered twice", Want: "≤ " + percent(maxDup),
				Got: strconv.FormatInt(s.AddedIDs, 10) + " (" + percent(share) + ")", Met: share <= maxDup,
			})
		}
		if delivery == forwarder.ExactlyOnce {
			// AddedIDs, not DuplicateIDs: an id the ingress holds twice
			// (WrittenTwice) is two records to kdelay, each delivered once.
			goals = append(goals, Goal{
				Name: name + "ids kdelay delivered twice", Want: "0",
				Got: strconv.FormatInt(s.AddedIDs, 10), Met: s.AddedIDs == 0,
			})
		}
	}
	return goals
}

// backGoal: the system was back after every fault within the back timeout,
// which counts once the fault is injected (node-kill's node started again,
// say), as Fault.BackOK says; Back counts from the fault's start and may
// be longer.
func backGoal(name string, faults []Fault) Goal {
	var back int
	for _, f := range faults {
		if f.BackOK {
			back++
		}
	}
	all := strconv.Itoa(len(faults))
	return Goal{Name: name, Want: all + " of " + all, Got: strconv.Itoa(back) + " of " + all, Met: back == len(faults)}
}

// Met reports whether every goal was met and every scenario ran to its
// end.
func (r *FaultReport) Met() bool {
	for _, g := range r.Goals {
		if !g.Met {
			return false
		}
	}
	for _, s := range r.Scenarios {
		if s.Error != "" {
			return false
		}
	}
	return true
}
