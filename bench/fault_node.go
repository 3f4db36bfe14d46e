package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay/forwarder"
)

// The roles by which FaultConfig.NodeRole picks the node a cluster scenario
// faults. Each is looked up when the fault is injected.
const (
	// NodeLeader leads the most partitions of the scenario's target, where
	// kdelay delivers (ties: the most of all its topics, then the lowest
	// id).
	NodeLeader = "leader"
	// NodeGroupCoordinator coordinates the consumer group of kdelay's
	// ingress router.
	NodeGroupCoordinator = "group-coordinator"
	// NodeTxnCoordinator coordinates the transactions of the ingress router
	// of the first kdelay serve started (exactly-once delivery only).
	NodeTxnCoordinator = "txn-coordinator"
	// NodeController is the active KRaft controller, the leader of the
	// metadata quorum.
	NodeController = "controller"
)

// NodeRoles are the roles FaultConfig.NodeRole may name.
var NodeRoles = []string{NodeLeader, NodeGroupCoordinator, NodeTxnCoordinator, NodeController}

// nodeFor is the node that plays role for the scenario now.
func (r *faultRun) nodeFor(ctx context.Context, role string) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var id int32
	var err error
	switch role {
	case NodeGroupCoordinator:
		id, err = coordinator(r.c.adm.FindGroupCoordinators(ctx, forwarderGroups(r.name, r.cfg.Levels)[0]))
	case NodeTxnCoordinator:
		id, err = coordinator(r.c.adm.FindTxnCoordinators(ctx, r.txnID()))
	case NodeController:
		id, err = activeController(ctx, r.c.cl)
	default:
		var topics kadm.TopicDetails
		if topics, err = r.topics(ctx, false); err == nil {
			id, err = busiestLeader(topics, r.s.target)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("find the %s node: %w", role, err)
	}
	return id, nil
}

// txnID is the transactional id of the process in slot 0, which the
// cluster scenarios never stop; no suffix off the embedded broker.
func (r *faultRun) txnID() string {
	return forwarder.TransactionalID(instanceID(r.name, 0), r.name, "")
}

// topics describes the scenario's topics, and with internal Kafka's
// internal ones too: the coordinators' offsets and transaction state.
func (r *faultRun) topics(ctx context.Context, internal bool) (kadm.TopicDetails, error) {
	_, all, err := clusterMetadata(ctx, r.c.cl)
	if err != nil {
		return nil, err
	}
	maps.DeleteFunc(all, func(name string, t kadm.TopicDetail) bool {
		return !strings.HasPrefix(name, r.name+".") && !(internal && t.IsInternal)
	})
	return all, nil
}

// clusterMetadata asks the cluster for its nodes and all its topics,
// internal ones included. It bypasses the client's cache, which kadm's
// metadata reads: kadm.BrokerMetadata answers with the nodes the client
// last saw, without a node that was down until the client's next refresh
// (up to 5 minutes later), and kadm.ListTopics with data up to 5 s old,
// from before a node's restart.
func clusterMetadata(ctx context.Context, cl *kgo.Client) (kadm.BrokerDetails, kadm.TopicDetails, error) {
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("read the cluster's metadata: %w", err)
	}
	var brokers kadm.BrokerDetails
	for _, b := range resp.Brokers {
		brokers = append(brokers, kadm.BrokerDetail{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	topics := kadm.TopicDetails{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		td := kadm.TopicDetail{Topic: *t.Topic, IsInternal: t.IsInternal, Partitions: kadm.PartitionDetails{}, Err: kerr.ErrorForCode(t.ErrorCode)}
		for _, p := range t.Partitions {
			td.Partitions[p.Partition] = kadm.PartitionDetail{
				Topic: td.Topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, OfflineReplicas: p.OfflineReplicas, Err: kerr.ErrorForCode(p.ErrorCode),
			}
		}
		topics[td.Topic] = td
	}
	return brokers, topics, nil
}

func coordinator(resps kadm.FindCoordinatorResponses) (int32, error) {
	for _, c := range resps {
		if c.Err != nil {
			return 0, fmt.Errorf("find coordinator of %s: %w", c.Name, c.Err)
		}
		return c.NodeID, nil
	}
	return 0, errors.New("find coordinator: no answer")
}

// activeController asks any broker for the leader of the KRaft metadata
// quorum (a broker forwards DescribeQuorum to the controllers). Metadata's
// controller id cannot tell: a KRaft broker names a random broker there.
func activeController(ctx context.Context, cl *kgo.Client) (int32, error) {
	p := kmsg.NewDescribeQuorumRequestTopicPartition()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic, t.Partitions = "__cluster_metadata", []kmsg.DescribeQuorumRequestTopicPartition{p}
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("describe the metadata quorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, fmt.Errorf("describe the metadata quorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, errors.New("describe the metadata quorum: no partition in the answer")
	}
	qp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(qp.ErrorCode); err != nil {
		return 0, fmt.Errorf("describe the metadata quorum: %w", err)
	}
	if qp.LeaderID < 0 {
		return 0, errors.New("describe the metadata quorum: it has no leader")
	}
	return qp.LeaderID, nil
}

// busiestLeader is the node that leads the most partitions of target; a tie
// goes to the one that leads the most partitions of all topics, then to the
// lowest id.
func busiestLeader(topics kadm.TopicDetails, target string) (int32, error) {
	led := func(names ...string) map[int32]int {
		n := map[int32]int{}
		for _, name := range names {
			for _, p := range topics[name].Partitions {
				if p.Leader >= 0 {
					n[p.Leader]++
				}
			}
		}
		return n
	}
	inTarget, inAll := led(target), led(slices.Collect(maps.Keys(topics))...)
	if len(inTarget) == 0 {
		return 0, fmt.Errorf("no partition of %s has a leader", target)
	}
	ids := slices.Sorted(maps.Keys(inTarget))
	// SortStableFunc keeps the lowest id first among equals.
	slices.SortStableFunc(ids, func(a, b int32) int {
		return cmp.Or(cmp.Compare(inTarget[b], inTarget[a]), cmp.Compare(inAll[b], inAll[a]))
	})
	return ids[0], nil
}
