package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// TestFaultGoals: lost and early records fail every scenario, a fault not
// back within the back timeout of its end fails it (a fault back later
// than that from its start does not), and duplicates fail only
// exactly-once, counting the ids kdelay repeated, not those the ingress
// holds twice; a rolling restart fails when a record came more than a
// second late.
func TestFaultGoals(t *testing.T) {
	t.Parallel()
	back := func(d time.Duration) Fault { return Fault{At: 6 * time.Second, Back: d, BackOK: true} }
	scenarios := []FaultResult{
		{Scenario: ScenarioNodeKill, Faults: []Fault{back(72 * time.Second), back(4 * time.Second)}, DuplicateIDs: 30, WrittenTwice: 30},
		{Scenario: ScenarioKill, Lost: 2, Early: 1, Faults: []Fault{{At: 6 * time.Second, Back: time.Minute}}, DuplicateIDs: 5, AddedIDs: 5},
		{Scenario: ScenarioScale, Error: "deadline"},
		{Scenario: ScenarioRoll, All: Group{Max: 1200 * time.Millisecond}},
	}
	t.Run("at-least-once judges no duplicate", func(t *testing.T) {
		t.Parallel()
		want := []Goal{
			{"node-kill: lost records", "0", "0", true},
			{"node-kill: early records", "0", "0", true},
			{"node-kill: faults back within 1m0s", "2 of 2", "2 of 2", true},
			{"kill: lost records", "0", "2", false},
			{"kill: early records", "0", "1", false},
			{"kill: faults back within 1m0s", "1 of 1", "0 of 1", false},
			{"scale: lost records", "0", "0", true},
			{"scale: early records", "0", "0", true},
			{"roll: lost records", "0", "0", true},
			{"roll: early records", "0", "0", true},
			{"roll: max lateness", "≤ 1s", "1.2s", false},
		}
		if got := faultGoals(scenarios, forwarder.AtLeastOnce, time.Minute, 0); !slices.Equal(got, want) {
			t.Errorf("goals\n%+v\nwant\n%+v", got, want)
		}
	})
	t.Run("exactly-once judges the ids kdelay delivered twice", func(t *testing.T) {
		t.Parallel()
		var got []Goal
		for _, g := range faultGoals(scenarios, forwarder.ExactlyOnce, time.Minute, 0) {
			if g.Name == "node-kill: ids kdelay delivered twice" || g.Name == "kill: ids kdelay delivered twice" {
				got = append(got, g)
			}
		}
		want := []Goal{{"node-kill: ids kdelay delivered twice", "0", "0", true}, {"kill: ids kdelay delivered twice", "0", "5", false}}
		if !slices.Equal(got, want) {
			t.Errorf("duplicate goals %+v, want %+v", got, want)
		}
	})
	t.Run("at-least-once judges the share kdelay delivered twice against max-duplicates", func(t *testing.T) {
		t.Parallel()
		sent := []FaultResult{
			{Scenario: ScenarioNodeKill, Sent: 4000, DuplicateIDs: 70, WrittenTwice: 30, AddedIDs: 40},
			{Scenario: ScenarioKill, Sent: 4000, DuplicateIDs: 42, AddedIDs: 42},
		}
		var got []Goal
		for _, g := range faultGoals(sent, forwarder.AtLeastOnce, time.Minute, 0.01) {
			if g.Name == "node-kill: ids kdelay delivered twice" || g.Name == "kill: ids kdelay delivered twice" {
				got = append(got, g)
			}
		}
		want := []Goal{{"node-kill: ids kdelay delivered twice", "≤ 1.00%", "40 (1.00%)", true}, {"kill: ids kdelay delivered twice", "≤ 1.00%", "42 (1.05%)", false}}
		if !slices.Equal(got, want) {
			t.Errorf("duplicate goals %+v, want %+v", got, want)
		}
	})
	t.Run("a scenario that ended early is not met", func(t *testing.T) {
		t.Parallel()
		rep := &FaultReport{Scenarios: scenarios[2:], Goals: faultGoals(scenarios[2:], forwarder.AtLeastOnce, time.Minute, 0)}
		if rep.Met() {
			t.Errorf("Met with scenario error %q and goals %+v", scenarios[2].Error, rep.Goals)
		}
	})
}
