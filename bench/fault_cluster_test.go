package bench

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// topicsOf builds metadata: each topic's partitions as their leader,
// replicas and ISR.
func topicsOf(parts map[string][]kadm.PartitionDetail) kadm.TopicDetails {
	out := kadm.TopicDetails{}
	for name, ps := range parts {
		t := kadm.TopicDetail{Topic: name, Partitions: kadm.PartitionDetails{}}
		for i, p := range ps {
			p.Topic, p.Partition = name, int32(i)
			t.Partitions[p.Partition] = p
		}
		out[name] = t
	}
	return out
}

func led(leaders ...int32) []kadm.PartitionDetail {
	out := make([]kadm.PartitionDetail, len(leaders))
	for i, l := range leaders {
		out[i] = kadm.PartitionDetail{Leader: l, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}
	}
	return out
}

// TestBusiestLeader: node-kill's leader is the node that leads the most
// partitions of the target, whatever it leads elsewhere; a tie goes to the
// one that leads the most of all topics, then to the lowest id.
func TestBusiestLeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		topics map[string][]kadm.PartitionDetail
		want   int32
	}{
		{"most of the target", map[string][]kadm.PartitionDetail{"t": led(3, 3, 1), "x.ingress": led(1, 1, 1, 2)}, 3},
		{"tie: most of all", map[string][]kadm.PartitionDetail{"t": led(1, 2, 1, 2), "x.ingress": led(2, 3)}, 2},
		{"tie everywhere: lowest id", map[string][]kadm.PartitionDetail{"t": led(3, 2)}, 2},
		{"no leader counts for none", map[string][]kadm.PartitionDetail{"t": led(-1, -1, 2)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := busiestLeader(topicsOf(tt.topics), "t")
			if err != nil || got != tt.want {
				t.Errorf("busiestLeader = %d, %v; want node %d", got, err, tt.want)
			}
		})
	}
	t.Run("a target without leaders is an error", func(t *testing.T) {
		t.Parallel()
		if got, err := busiestLeader(topicsOf(map[string][]kadm.PartitionDetail{"t": led(-1)}), "t"); err == nil {
			t.Errorf("busiestLeader = node %d, want an error: no partition has a leader", got)
		}
	})
}

// TestOutOfSync: a rolled node is back once it is in the ISR of every
// partition it replicates; a partition it does not replicate does not wait
// for it.
func TestOutOfSync(t *testing.T) {
	t.Parallel()
	topics := topicsOf(map[string][]kadm.PartitionDetail{
		"a": {
			{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}},
			{Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3, 1}},
		},
		"__consumer_offsets": {
			{Replicas: []int32{1, 3}, ISR: []int32{1, 3}},
			{Replicas: []int32{2, 3}, ISR: []int32{3}},
		},
	})
	for _, tc := range []struct {
		node int32
		want []string
	}{{1, nil}, {2, []string{"__consumer_offsets/1", "a/0"}}, {3, nil}} {
		if got := outOfSync(topics, tc.node); !slices.Equal(got, tc.want) {
			t.Errorf("outOfSync(node %d) = %q, want %q", tc.node, got, tc.want)
		}
	}
}

// TestFewReplicas: a topic with any partition on fewer nodes than the
// cluster has is named, so that a scenario does not measure a cluster that
// loses partitions with a node.
func TestFewReplicas(t *testing.T) {
	t.Parallel()
	topics := topicsOf(map[string][]kadm.PartitionDetail{
		"rf3": led(1, 2),
		"rf1": {{Leader: 1, Replicas: []int32{1}}, {Leader: 2, Replicas: []int32{2}}},
		"mixed": {
			{Leader: 1, Replicas: []int32{1, 2, 3}},
			{Leader: 2, Replicas: []int32{2, 3}},
		},
	})
	if got, want := fewReplicas(topics, 3), []string{"mixed", "rf1"}; !slices.Equal(got, want) {
		t.Errorf("fewReplicas = %q, want %q", got, want)
	}
}

// TestRollOrder: the active controller is rolled last, the rest in order;
// an unknown controller changes nothing.
func TestRollOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		controller int32
		want       []int32
	}{{1, []int32{2, 3, 1}}, {2, []int32{1, 3, 2}}, {3, []int32{1, 2, 3}}, {7, []int32{1, 2, 3}}} {
		if got := rollOrder([]int32{1, 2, 3}, tc.controller); !slices.Equal(got, tc.want) {
			t.Errorf("rollOrder(controller %d) = %v, want %v", tc.controller, got, tc.want)
		}
	}
}

// TestClusterPort: the script is told node 1's client port; a cluster that
// is not nodes 1 to 3 is refused with what it has.
func TestClusterPort(t *testing.T) {
	t.Parallel()
	node := func(id, port int32) kadm.BrokerDetail {
		return kadm.BrokerDetail{NodeID: id, Host: "127.0.0.1", Port: port}
	}
	if got, err := clusterPort(kadm.BrokerDetails{node(3, 19996), node(1, 19992), node(2, 19994)}); err != nil || got != "19992" {
		t.Errorf("clusterPort = %q, %v; want node 1's port 19992", got, err)
	}
	for _, tc := range []struct {
		name    string
		brokers kadm.BrokerDetails
		want    string
	}{
		{"one node", kadm.BrokerDetails{node(1, 19092)}, "the cluster's nodes are [1], not 1 to 3"},
		{"a node down", kadm.BrokerDetails{node(1, 19992), node(3, 19996)}, "the cluster's nodes are [1 3], not 1 to 3"},
		{"other ids", kadm.BrokerDetails{node(0, 9092), node(1, 9093), node(2, 9094)}, "the cluster's nodes are [0 1 2], not 1 to 3"},
	} {
		if _, err := clusterPort(tc.brokers); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: clusterPort error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestFaultedNodesLine: the table names the nodes each fault of a cluster
// scenario stopped, and the role that picked the first, except for a roll,
// which stops every node.
func TestFaultedNodesLine(t *testing.T) {
	t.Parallel()
	rep := &FaultReport{NodeRole: NodeController, Scenarios: []FaultResult{
		{Scenario: ScenarioKill, Faults: []Fault{{}}, MaxDueAt: 7700 * time.Millisecond, FloorMaxDueAt: 8300 * time.Millisecond,
			All: Group{Delivered: 1}, Floor: Group{Delivered: 1}},
		{Scenario: ScenarioQuorumLoss, Faults: []Fault{{Nodes: []int32{3, 1}}}},
		{Scenario: ScenarioNodeRoll, Faults: []Fault{{Nodes: []int32{1, 3, 2}}}},
	}}
	var out strings.Builder
	if err := WriteFaultTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"quorum-loss at 0.0 s: node 3 (controller), 1\n", "node-roll at 0.0 s: node 1, 3, 2\n",
		"kill: the latest record was due at 7.7 s, the floor's at 8.3 s\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table without %q:\n%s", want, out.String())
		}
	}
}
