package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// localKafka controls the Apache Kafka broker that scripts/local-kafka
// started on a port: broker-restart stops it and starts it again with its
// data, on the same ports.
type localKafka struct {
	script string
	port   string
}

// newLocalKafka is the local-kafka broker at broker, which must be one the
// script started (it stops only those).
func newLocalKafka(ctx context.Context, script, broker string) (*localKafka, error) {
	_, port, err := net.SplitHostPort(broker)
	if err != nil {
		return nil, fmt.Errorf("broker-restart: %q is not host:port: %w", broker, err)
	}
	k := &localKafka{script: script, port: port}
	if err := k.run(ctx, "status"); err != nil {
		return nil, fmt.Errorf("broker-restart restarts the broker with %s, and there is none it started on port %s (%w): start it with `KAFKA_PORT=%s %s start`, run from the checkout or name the script with --local-kafka, or leave broker-restart out",
			script, port, err, port, script)
	}
	return k, nil
}

// restart stops the broker and starts it again, keeping its data.
func (k *localKafka) restart(ctx context.Context) error {
	if err := k.run(ctx, "stop"); err != nil {
		return err
	}
	return k.run(ctx, "start")
}

func (k *localKafka) run(ctx context.Context, arg string) error {
	return runScript(ctx, k.script, []string{"KAFKA_PORT=" + k.port, "KAFKA_KEEP_DATA=1"}, arg)
}

// clusterNodes is how many nodes the cluster scenarios run on: any two of
// them keep the KRaft quorum and the two in-sync replicas an acks=all
// write needs (min.insync.replicas=2); quorum-loss kills two.
const clusterNodes = 3

// localCluster controls the nodes of a cluster that `KAFKA_NODES=3
// scripts/local-kafka start` started. Node n has Kafka node.id n, and the
// script finds the nodes by the client port of node 1 (its KAFKA_PORT).
// Each node is stopped or killed alone and started again with its data.
type localCluster struct {
	script string
	port   string  // node 1's client port
	ids    []int32 // 1 to clusterNodes
}

// newLocalCluster is the local-kafka cluster that cl is connected to. It
// refuses a cluster of another size and one the script did not start (it
// controls only those).
func newLocalCluster(ctx context.Context, script string, cl *kgo.Client) (*localCluster, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	brokers, _, err := clusterMetadata(ctx, cl)
	var port string
	if err == nil {
		port, err = clusterPort(brokers)
	}
	if err != nil {
		return nil, fmt.Errorf("%w; the cluster scenarios run on the %d nodes of a local-kafka cluster: start one with `KAFKA_NODES=%d %s start` and pass the addresses it prints to --brokers",
			err, clusterNodes, clusterNodes, script)
	}
	k := &localCluster{script: script, port: port, ids: []int32{1, 2, 3}}
	if err := k.run(ctx, "status"); err != nil {
		return nil, fmt.Errorf("the cluster scenarios stop and start nodes with %s, and it started no cluster with node 1 on port %s (%w): start one with `KAFKA_NODES=%d KAFKA_PORT=%s %s start`, run from the checkout or name the script with --local-kafka",
			script, port, err, clusterNodes, port, script)
	}
	return k, nil
}

// clusterPort is node 1's client port, for a cluster of exactly the nodes
// 1 to clusterNodes.
func clusterPort(brokers kadm.BrokerDetails) (string, error) {
	var ids []int32
	for _, b := range brokers {
		ids = append(ids, b.NodeID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int32{1, 2, 3}) {
		return "", fmt.Errorf("the cluster's nodes are %v, not 1 to %d", ids, clusterNodes)
	}
	i := slices.IndexFunc(brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == 1 })
	return strconv.Itoa(int(brokers[i].Port)), nil
}

// kill SIGKILLs node id: it leaves no clean shutdown, as a crash.
func (k *localCluster) kill(ctx context.Context, id int32) error { return k.run(ctx, "kill", id) }

// stop stops node id with SIGTERM: a controlled shutdown, which moves its
// leaderships away before it exits.
func (k *localCluster) stop(ctx context.Context, id int32) error { return k.run(ctx, "stop", id) }

// start starts node id again with its data, and returns once it serves.
func (k *localCluster) start(ctx context.Context, id int32) error { return k.run(ctx, "start", id) }

// next is the node after id, in a ring of the cluster's nodes.
func (k *localCluster) next(id int32) int32 { return id%clusterNodes + 1 }

func (k *localCluster) run(ctx context.Context, arg string, ids ...int32) error {
	args := []string{arg}
	for _, id := range ids {
		args = append(args, strconv.Itoa(int(id)))
	}
	env := []string{"KAFKA_NODES=" + strconv.Itoa(clusterNodes), "KAFKA_PORT=" + k.port, "KAFKA_KEEP_DATA=1"}
	return runScript(ctx, k.script, env, args...)
}

// runScript runs scripts/local-kafka with args and env, for at most 3
// minutes (its own start timeout is 2).
func runScript(ctx context.Context, script string, env []string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", script, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
