package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay/forwarder"
)

// clusterInstances is how many kdelay serve the cluster scenarios run, each
// with an instance id of its own.
const clusterInstances = 2

// clusterScenarios are those of names that need a local-kafka cluster.
func clusterScenarios(names []string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(s string) bool { return !slices.Contains(ClusterScenarios, s) })
}

// validateCluster checks the settings of the cluster scenarios.
func (c FaultConfig) validateCluster() error {
	var errs []error
	if !slices.Contains(NodeRoles, c.NodeRole) {
		errs = append(errs, fmt.Errorf("node-role: %q is not a role; pick from %s", c.NodeRole, strings.Join(NodeRoles, ", ")))
	}
	cluster := clusterScenarios(c.Scenarios)
	if len(cluster) == 0 {
		return errors.Join(errs...)
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, fmt.Errorf("scenarios: the cluster scenarios (%s) fault the nodes of a %d-node Apache Kafka cluster, not the embedded broker: start one with `KAFKA_NODES=%d %s start` and pass the addresses it prints to --brokers",
			strings.Join(cluster, ", "), clusterNodes, clusterNodes, c.LocalKafka))
	}
	if c.NodeRole == NodeTxnCoordinator && c.Delivery != forwarder.ExactlyOnce {
		errs = append(errs, fmt.Errorf("node-role: %s coordinates kdelay's transactions, and only exactly-once delivery has them (delivery is %s); add --delivery exactly-once or pick another role",
			c.NodeRole, c.Delivery))
	}
	return errors.Join(errs...)
}

// checkCluster refuses cluster scenarios on brokers that are not a
// local-kafka cluster of clusterNodes, before any scenario starts.
func checkCluster(ctx context.Context, cfg FaultConfig) error {
	if len(clusterScenarios(cfg.Scenarios)) == 0 {
		return nil
	}
	c, err := openCluster(cfg.Brokers, nil, cfg.Partitions, cfg.Logger)
	if err != nil {
		return err
	}
	c.discard = true // it creates nothing
	defer c.close()
	_, err = newLocalCluster(ctx, cfg.LocalKafka, c.cl)
	return err
}

// killNode SIGKILLs the node NodeRole picks and starts it again with its
// data after NodeDown: its partitions' leadership moves to the other two,
// and its coordinators' groups and transactions with it.
func killNode(ctx context.Context, r *faultRun) (int, int, error) {
	id, err := r.nodeFor(ctx, r.cfg.NodeRole)
	if err != nil {
		return 0, 0, err
	}
	return r.killNodes(ctx, id)
}

// loseQuorum SIGKILLs the node NodeRole picks and the next one at once:
// the one left has neither a KRaft quorum nor the two in-sync replicas an
// acks=all write needs (min.insync.replicas=2), so nothing is written
// until one of them is back.
func loseQuorum(ctx context.Context, r *faultRun) (int, int, error) {
	id, err := r.nodeFor(ctx, r.cfg.NodeRole)
	if err != nil {
		return 0, 0, err
	}
	return r.killNodes(ctx, id, r.nodes.next(id))
}

// killNodes SIGKILLs ids at once, waits NodeDown, and starts them again
// one after the other: the first back restores the quorum the second needs
// to register.
func (r *faultRun) killNodes(ctx context.Context, ids ...int32) (int, int, error) {
	r.faulted = ids
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { errs[i] = r.nodes.kill(ctx, id) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	r.cfg.Logger.Info("nodes_killed", "scenario", r.sc.name, "nodes", ids)
	if err := sleepUntil(ctx, time.Now().Add(r.cfg.NodeDown)); err != nil {
		return 0, 0, err
	}
	for _, id := range ids {
		if err := r.nodes.start(ctx, id); err != nil {
			return 0, 0, err
		}
	}
	return len(r.fleet.procs), 0, nil
}

// rollNodes restarts every node as an operator rolls a cluster: SIGTERM
// (a controlled shutdown), start with its data, and the next only once the
// node is back in the ISR of every partition it replicates, so that no
// partition is ever down to fewer than two in-sync replicas by the roll.
// The active controller goes last, so that the quorum elects a new leader
// once, not at every step.
func rollNodes(ctx context.Context, r *faultRun) (int, int, error) {
	order := r.nodes.ids
	if id, err := activeController(ctx, r.c.cl); err != nil {
		r.cfg.Logger.Warn("controller_unknown", "scenario", r.sc.name, "err", err)
	} else {
		order = rollOrder(order, id)
	}
	r.faulted = order
	for _, id := range order {
		if err := r.nodes.stop(ctx, id); err != nil {
			return 0, 0, err
		}
		if err := r.nodes.start(ctx, id); err != nil {
			return 0, 0, err
		}
		if err := r.waitInSync(ctx, id); err != nil {
			return 0, 0, err
		}
	}
	return len(r.fleet.procs), 0, nil
}

// rollOrder is ids with the controller last.
func rollOrder(ids []int32, controller int32) []int32 {
	out := slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return id == controller })
	if len(out) == len(ids) {
		return out
	}
	return append(out, controller)
}

// waitInSync waits until node id is in the ISR of every partition it
// replicates, of the scenario's topics and the coordinators'; an error
// after BackTimeout.
func (r *faultRun) waitInSync(ctx context.Context, id int32) error {
	deadline := time.Now().Add(r.cfg.BackTimeout)
	var behind []string
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		topics, err := r.topics(qctx, true)
		cancel()
		if err == nil {
			if behind = outOfSync(topics, id); len(behind) == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d not back in the ISR of %d partitions (%s…) within %s (last error: %v)",
				id, len(behind), strings.Join(behind[:min(3, len(behind))], ", "), r.cfg.BackTimeout, err)
		}
		if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
			return err
		}
	}
}

// outOfSync are the partitions, as topic/partition, that replicate on node
// id and do not have it in their ISR.
func outOfSync(topics kadm.TopicDetails, id int32) []string {
	var out []string
	for _, t := range topics.Sorted() {
		for _, p := range t.Partitions.Sorted() {
			if slices.Contains(p.Replicas, id) && !slices.Contains(p.ISR, id) {
				out = append(out, fmt.Sprintf("%s/%d", p.Topic, p.Partition))
			}
		}
	}
	return out
}

// checkReplicas refuses a cluster scenario whose topics are not on every
// node: it would measure a cluster that loses partitions with a node.
// kdelay serve and the driver both create topics with the broker's
// default.replication.factor.
func (r *faultRun) checkReplicas(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	topics, err := r.topics(ctx, false)
	if err != nil {
		return fmt.Errorf("describe the scenario's topics: %w", err)
	}
	if few := fewReplicas(topics, clusterNodes); len(few) > 0 {
		return fmt.Errorf("topics %s have fewer than %d replicas: the cluster scenarios measure replicated topics; set default.replication.factor=%d on the brokers (kdelay creates its topics with the broker's default)",
			strings.Join(few, ", "), clusterNodes, clusterNodes)
	}
	return nil
}

// fewReplicas are the topics with a partition on fewer than n nodes.
func fewReplicas(topics kadm.TopicDetails, n int) []string {
	var out []string
	for _, t := range topics.Sorted() {
		if slices.ContainsFunc(t.Partitions.Sorted(), func(p kadm.PartitionDetail) bool { return len(p.Replicas) < n }) {
			out = append(out, t.Topic)
		}
	}
	return out
}

// notServing says which node is not in the cluster's metadata (a node that
// has not registered again after a restart, or is fenced, is not) or does
// not answer a request of its own, and why; "" when every node serves.
func (r *faultRun) notServing(ctx context.Context) string {
	brokers, _, err := clusterMetadata(ctx, r.c.cl)
	if err != nil {
		return err.Error()
	}
	for _, id := range r.nodes.ids {
		if !slices.ContainsFunc(brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == id }) {
			return fmt.Sprintf("node %d in the cluster's metadata", id)
		}
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{} // none: nil asks for every topic
		if _, err := r.c.cl.Broker(int(id)).Request(ctx, req); err != nil {
			return fmt.Sprintf("node %d serving: %v", id, err)
		}
	}
	return ""
}
