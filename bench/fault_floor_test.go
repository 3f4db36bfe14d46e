package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFaultLateness: kdelay's records and the floor's twins are judged
// alike: a record refused and never arrived counts nowhere, one later than
// the grace is lost, copies after the first are duplicates, and a record
// counts as due during a fault by its due time.
func TestFaultLateness(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	r := &faultRun{cfg: &FaultConfig{Grace: time.Second}, started: t0, windows: []window{{t0.Add(time.Second), t0.Add(2 * time.Second)}}}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ts := []traced{
		{due: at(0), first: at(10 * time.Millisecond), copies: 1},                                            // before the fault
		{due: at(1500 * time.Millisecond), first: at(2 * time.Second), copies: 2},                            // during, 500ms late, twice
		{due: at(1800 * time.Millisecond), first: at(3 * time.Second), copies: 1},                            // during, past the grace: lost
		{due: at(1900 * time.Millisecond), refused: true},                                                    // refused: nowhere
		{due: at(3 * time.Second), first: at(3*time.Second + 20*time.Millisecond), copies: 1},                // after
		{due: at(4 * time.Second), first: at(4*time.Second + 30*time.Millisecond), refused: true, copies: 1}, // refused, yet arrived
	}
	all, during := r.lateness(ts)
	if all.Sent != 5 || all.Delivered != 4 || all.Lost != 1 || all.Duplicates != 1 || !near(all.Max, 500*time.Millisecond) {
		t.Errorf("all: sent %d, delivered %d, lost %d, duplicates %d, max %s; want 5, 4, 1, 1, 500ms (to 0.1%%)",
			all.Sent, all.Delivered, all.Lost, all.Duplicates, all.Max)
	}
	if during.Sent != 2 || during.Delivered != 1 || during.Lost != 1 || !near(during.Max, 500*time.Millisecond) {
		t.Errorf("during faults: sent %d, delivered %d, lost %d, max %s; want 2, 1, 1, 500ms (to 0.1%%)",
			during.Sent, during.Delivered, during.Lost, during.Max)
	}
	// The latest record within the grace, not the lost one.
	if got := r.maxDueAt(ts); got != 1500*time.Millisecond {
		t.Errorf("the latest record was due at %s, want 1.5s", got)
	}
}

// near: d is want within the histogram's 0.1%.
func near(d, want time.Duration) bool { return d >= want && d <= want+want/1000 }

// TestFaultTableFloor: the lateness table shows the floor beside kdelay and
// what kdelay adds to its max, "-" where the floor has no record, and names
// a floor that lost records.
func TestFaultTableFloor(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	g := func(n int64, p50, p99, max time.Duration) Group {
		return Group{Sent: n, Delivered: n, P50: p50, P99: p99, Max: max}
	}
	floor := g(3990, 2*ms, 4*ms, 1900*ms)
	floor.Sent, floor.Lost = 4000, 10
	rep := &FaultReport{Scenarios: []FaultResult{
		{
			Scenario: ScenarioNodeKill, All: g(4000, 3*ms, 2000*ms, 3100*ms), DuringFaults: g(900, 40*ms, 2500*ms, 3100*ms),
			Floor: floor, FloorDuringFaults: g(898, 30*ms, 1700*ms, 1900*ms), MaxOverFloor: 1200 * ms, DuringFaultsMaxOverFloor: 1200 * ms,
		},
		{Scenario: ScenarioKill, All: g(100, ms, 2*ms, 3*ms)},
	}}
	var out strings.Builder
	if err := WriteFaultTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	var rows []string // each line, its cells one space apart
	for _, l := range strings.Split(out.String(), "\n") {
		rows = append(rows, strings.Join(strings.Fields(l), " "))
	}
	for _, want := range []string{
		"LATENESS DUE RECORDS P50 ms P99 ms MAX ms FLOOR P50 FLOOR P99 FLOOR MAX MAX−FLOOR",
		"node-kill any time 4000 3.000 2000.000 3100.000 2.000 4.000 1900.000 1200.000",
		"node-kill during faults 900 40.000 2500.000 3100.000 30.000 1700.000 1900.000 1200.000",
		"kill any time 100 1.000 2.000 3.000 - - - -",
	} {
		if !slices.Contains(rows, want) {
			t.Errorf("table without the row %q:\n%s", want, out.String())
		}
	}
	if want := "node-kill: the floor lost 10 of its 4000 records"; !strings.Contains(out.String(), want) {
		t.Errorf("table without %q:\n%s", want, out.String())
	}
}
