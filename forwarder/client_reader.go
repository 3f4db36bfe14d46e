package forwarder

import (
	"context"
	"errors"
	"maps"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Reader reads a topic of its own on the forwarders' client, in their
// consumer group (Config.Readers): the group shares its topic's partitions
// among the processes as it shares the stages', and the client's one poll
// loop hands it its records. kdelay serve's scheduler (package schedule,
// which imports this one) is meant to read the schedules topic so, rather
// than in a group and on a client of its own (docs/design/one-client.md,
// step 8b).
//
// Its methods are called as a worker's are: Offsets, Assigned, Revoked
// and Lost from the group's callbacks, beside the workers' parts of the same
// callback; Take from the poll loop. With BlockRebalanceOnPoll, no callback
// runs while Take does, nor between a poll and the Take of what it fetched.
type Reader interface {
	// Topic is the topic it reads. Not a stage's.
	Topic() string

	// Prepare returns once Topic exists and is served, creating it if need
	// be, with adm: Run calls it before the client subscribes to Topic,
	// which would otherwise have the broker create it with its defaults.
	Prepare(ctx context.Context, adm *kadm.Client) error

	// Start hands it the client it reads on, each time the forwarders make
	// one (exactly-once makes a new one when its producer is fenced),
	// before that client's first poll.
	Start(cl *ReaderClient)

	// TxnEnded tells it, exactly-once, how the open transaction ended:
	// committed, or aborted, and then nothing it produced in it
	// (ReaderClient.Produce) was written.
	TxnEnded(committed bool)

	// Offsets sets where each partition of Topic assigned is read from:
	// offsets holds the group's committed offset of each, or the client's
	// reset (the topic's start) where there is none.
	Offsets(ctx context.Context, offsets map[int32]kgo.Offset)

	// Assigned gives it partitions of Topic; Revoked takes partitions away
	// as they move to another member, Lost when the group session ended.
	// Once Revoked or Lost returns, another process may own the
	// partitions: neither may return while anything decided from them is
	// still being written. Each may be called with no partitions.
	Assigned(ids []int32)
	Revoked(ctx context.Context, ids []int32)
	Lost(ctx context.Context, ids []int32)

	// Take hands it records of Topic, a partition's worth each, in the
	// order fetched.
	Take(fps []kgo.FetchTopicPartition)
}

// readersByTopic indexes readers by their topic.
func readersByTopic(readers []Reader) map[string]Reader {
	m := make(map[string]Reader, len(readers))
	for _, r := range readers {
		m[r.Topic()] = r
	}
	return m
}

// ReaderClient is what a Reader may do on the forwarders' client.
type ReaderClient struct {
	topic string
	cl    *kgo.Client
	gate  *pollGate
	txn   *txnLoop // nil at-least-once

	mu      sync.Mutex
	commits map[int32]int64 // offsets of topic to commit with the open transaction
}

func newReaderClient(topic string, cl *kgo.Client, gate *pollGate, txn *txnLoop) *ReaderClient {
	return &ReaderClient{topic: topic, cl: cl, gate: gate, txn: txn}
}

// Reread has the client read partitions of the Reader's topic again from
// the offsets given. It waits for the poll in progress to hand its records
// on, so that none read from before the new offsets comes after this
// returns, and no callback runs meanwhile.
func (c *ReaderClient) Reread(offsets map[int32]int64) {
	if len(offsets) == 0 {
		return
	}
	at := make(map[int32]kgo.EpochOffset, len(offsets))
	for p, o := range offsets {
		at[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	release := c.gate.hold()
	defer release()
	c.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{c.topic: at})
}

// Transactional reports whether the forwarders deliver exactly once: a
// Reader then writes with Produce, into their transaction.
func (c *ReaderClient) Transactional() bool { return c.txn != nil }

// errNotTransactional is Produce's error at-least-once.
var errNotTransactional = errors.New("the forwarders' client is not transactional: produce with a client of your own")

// Produce writes records into the process's open transaction, and commits
// offsets of the Reader's topic with it: the commit carries the group's
// generation, so the broker refuses the transaction of a process that lost
// those partitions (KIP-447). It returns once the records are handed to the
// client; TxnEnded tells the outcome. A record that fails aborts the
// transaction.
func (c *ReaderClient) Produce(ctx context.Context, records []*kgo.Record, commit map[int32]int64) error {
	if c.txn == nil {
		return errNotTransactional
	}
	c.txn.barrier.RLock()
	defer c.txn.barrier.RUnlock()
	if len(commit) > 0 {
		c.mu.Lock()
		if c.commits == nil {
			c.commits = map[int32]int64{}
		}
		maps.Copy(c.commits, commit)
		c.mu.Unlock()
	}
	for _, r := range records {
		c.cl.Produce(ctx, r, nil)
	}
	c.txn.noteProduced(c.txn.cfg.NowFunc())
	return nil
}

// takeCommits returns the offsets to commit with the transaction ending,
// and forgets them.
func (c *ReaderClient) takeCommits() map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	commits := c.commits
	c.commits = nil
	return commits
}

// addTxnOffsets adds offsets of topic to a TxnOffsetCommit.
func addTxnOffsets(req *kmsg.TxnOffsetCommitRequest, topic string, topicID [16]byte, offsets map[int32]int64) {
	if len(offsets) == 0 {
		return
	}
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic, rt.TopicID = topic, topicID
	for p, o := range offsets {
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
}
