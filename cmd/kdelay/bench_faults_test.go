package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/bench"
)

// TestBenchFaultsClusterFlags: the cluster scenarios' flags reach the
// configuration, and a cluster scenario the command cannot run is a usage
// error that says how to start a cluster, found before anything starts.
func TestBenchFaultsClusterFlags(t *testing.T) {
	t.Parallel()
	t.Run("node role and node down reach the configuration", func(t *testing.T) {
		t.Parallel()
		cmd := newBench()
		sub, rest, err := cmd.Find([]string{"faults", "--scenarios", "node-kill", "--node-role", "controller", "--node-down", "12s"})
		if err != nil {
			t.Fatal(err)
		}
		if err := sub.ParseFlags(rest); err != nil {
			t.Fatal(err)
		}
		fl := sub.Flags()
		role, down := fl.Lookup("node-role"), fl.Lookup("node-down")
		if role == nil || role.DefValue != bench.NodeLeader || role.Value.String() != bench.NodeController {
			t.Errorf("--node-role %+v, want default %s, set to %s", role, bench.NodeLeader, bench.NodeController)
		}
		if down == nil || down.DefValue != (5*time.Second).String() || down.Value.String() != (12*time.Second).String() {
			t.Errorf("--node-down %+v, want default 5s, set to 12s", down)
		}
	})
	tests := []struct {
		args []string
		want string // the first line kdelay prints
	}{
		{[]string{"bench", "faults", "--scenarios", "node-kill"},
			"kdelay: scenarios: the cluster scenarios (node-kill) fault the nodes of a 3-node Apache Kafka cluster, not the embedded broker: start one with `KAFKA_NODES=3 scripts/local-kafka start` and pass the addresses it prints to --brokers"},
		{[]string{"bench", "faults", "--node-role", "leaders"},
			`kdelay: node-role: "leaders" is not a role; pick from leader, group-coordinator, txn-coordinator, controller`},
		{[]string{"bench", "faults", "--scenarios", "quorum-loss", "--brokers", "127.0.0.1:19992", "--node-role", "txn-coordinator"},
			"kdelay: node-role: txn-coordinator coordinates kdelay's transactions, and only exactly-once delivery has them (delivery is at-least-once); add --delivery exactly-once or pick another role"},
		{[]string{"bench", "faults", "--scenarios", "node-roll", "--brokers", "127.0.0.1:19992", "--node-down", "-1s"},
			"kdelay: node-down: -1s is negative; use a positive duration"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			root := newRoot()
			var out bytes.Buffer
			root.SetArgs(tt.args)
			root.SetOut(&out)
			root.SetErr(&out)
			code := exitCode(root.Execute(), &out)
			first, _, _ := strings.Cut(out.String(), "\n")
			if code != 2 || first != tt.want {
				t.Errorf("exit %d, printed %q, want exit 2 and first line %q", code, out.String(), tt.want)
			}
		})
	}
}

// TestBenchFaultsGoals: the command fails after printing its table when a
// goal is missed or a scenario did not run to its end, naming each, and
// succeeds when every goal is met.
func TestBenchFaultsGoals(t *testing.T) {
	t.Parallel()
	met := bench.Goal{Name: "node-kill: lost records", Want: "0", Got: "0", Met: true}
	missed := bench.Goal{Name: "node-kill: ids kdelay delivered twice", Want: "0", Got: "3", Met: false}
	tests := []struct {
		name string
		rep  bench.FaultReport
		want string // the error; "" for none
	}{
		{"every goal met", bench.FaultReport{Scenarios: []bench.FaultResult{{Scenario: "node-kill"}}, Goals: []bench.Goal{met}}, ""},
		{"a goal missed and a scenario ended early", bench.FaultReport{
			Scenarios: []bench.FaultResult{{Scenario: "node-kill"}, {Scenario: "node-roll", Error: "context canceled"}},
			Goals:     []bench.Goal{met, missed},
		}, "faults failed: node-kill: ids kdelay delivered twice: 3, want 0; node-roll ended early: context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			var got string
			if err := (&benchFlags{}).writeFaults(&tt.rep, "", &out); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("error %q, want %q", got, tt.want)
			}
			if !strings.Contains(out.String(), "node-kill: lost records") {
				t.Errorf("table lacks the goals:\n%s", out.String())
			}
		})
	}
}

// TestBenchFaultsRecords: --records writes every record of every scenario
// as CSV, when each was due and arrived, also when a goal is missed, since
// that is when they are wanted.
func TestBenchFaultsRecords(t *testing.T) {
	t.Parallel()
	rep := bench.FaultReport{
		Scenarios: []bench.FaultResult{{Scenario: "node-kill", Records: []bench.RecordTrace{
			{Series: "kdelay", ID: 0, Due: 1500 * time.Millisecond, Arrived: 3750 * time.Millisecond, Copies: 1},
			{Series: "kdelay", ID: 1, Due: 2 * time.Second, Copies: 0},
			{Series: "floor", ID: 0, Due: 1500 * time.Millisecond, Arrived: 1520 * time.Millisecond, Copies: 2},
		}}},
		Goals: []bench.Goal{{Name: "node-kill: lost records", Want: "0", Got: "1", Met: false}},
	}
	path := filepath.Join(t.TempDir(), "records.csv")
	var out bytes.Buffer
	if err := (&benchFlags{}).writeFaults(&rep, path, &out); err == nil {
		t.Fatal("a missed goal did not fail the command")
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no records file: %v", err)
	}
	want := "scenario,series,id,due_s,arrived_s,late_s,copies,refused\n" +
		"node-kill,kdelay,0,1.500000,3.750000,2.250000,1,false\n" +
		"node-kill,kdelay,1,2.000000,,,0,false\n" +
		"node-kill,floor,0,1.500000,1.520000,0.020000,2,false\n"
	if string(got) != want {
		t.Errorf("records file:\n%s\nwant:\n%s", got, want)
	}
}
