package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// TestFaultConfigValidate: a fault configuration that cannot run is refused
// with the fix, before any process starts.
func TestFaultConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  FaultConfig
		want string // in the error; "" for none
	}{
		{"defaults", FaultConfig{}, ""},
		{"unknown scenario", FaultConfig{Scenarios: []string{"reboot"}}, `"reboot" is not a scenario; pick from kill-restart, kill, broker-restart, scale, roll, node-kill, node-roll, quorum-loss`},
		{"cluster scenario on the embedded broker", FaultConfig{Scenarios: []string{ScenarioNodeKill, ScenarioKill}},
			"the cluster scenarios (node-kill) fault the nodes of a 3-node Apache Kafka cluster, not the embedded broker: start one with `KAFKA_NODES=3 scripts/local-kafka start`"},
		{"cluster scenario on a cluster", FaultConfig{Scenarios: []string{ScenarioNodeRoll}, Brokers: []string{"127.0.0.1:19992"}}, ""},
		{"unknown node role", FaultConfig{NodeRole: "broker"}, `node-role: "broker" is not a role; pick from leader, group-coordinator, txn-coordinator, controller`},
		{"txn coordinator at least once", FaultConfig{Scenarios: []string{ScenarioNodeKill}, Brokers: []string{"127.0.0.1:19992"}, NodeRole: NodeTxnCoordinator},
			"only exactly-once delivery has them (delivery is at-least-once); add --delivery exactly-once"},
		{"txn coordinator exactly once", FaultConfig{Scenarios: []string{ScenarioQuorumLoss}, Brokers: []string{"127.0.0.1:19992"}, NodeRole: NodeTxnCoordinator, Delivery: forwarder.ExactlyOnce}, ""},
		{"negative node down", FaultConfig{NodeDown: -time.Second}, "node-down: -1s is negative"},
		{"fault after writing", FaultConfig{Duration: 10 * time.Second, FaultAt: 10 * time.Second}, "inject the fault while records are written"},
		{"negative rate", FaultConfig{Rate: -1}, "rate: -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.WithDefaults().validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("validate: %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("validate: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

// TestFaultDeadline: a scenario is bounded by more than what it waits for
// when nothing goes wrong, so that a slow recovery is measured, not cut.
func TestFaultDeadline(t *testing.T) {
	t.Parallel()
	cfg := FaultConfig{}.WithDefaults()
	if need := cfg.Duration + cfg.MaxDelay + cfg.Grace + cfg.BackTimeout; cfg.deadline() <= need {
		t.Errorf("deadline %s, want more than writing, the longest delay, the grace and a way back: %s", cfg.deadline(), need)
	}
}

// TestWindowHolds: a record due at either end of a fault's window counts as
// due during the fault.
func TestWindowHolds(t *testing.T) {
	t.Parallel()
	from := time.Now()
	w := window{from, from.Add(time.Second)}
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{{from.Add(-time.Millisecond), false}, {from, true}, {from.Add(time.Second), true}, {from.Add(time.Second + 1), false}} {
		if got := w.holds(tc.at); got != tc.want {
			t.Errorf("holds(from%+v) = %v, want %v", tc.at.Sub(from), got, tc.want)
		}
	}
}
