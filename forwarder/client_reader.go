package forwarder

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Reader reads a topic of its own on the forwarders' client, in their
// consumer group (Config.Readers): the group shares its topic's partitions
// among the processes as it shares the stages', and the client's one poll
// loop hands it its records. kdelay serve's scheduler (package schedule,
// which imports this one) reads the schedules topic so, rather than in a
// group and on a client of its own (docs/design/one-client.md, step 8b).
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
	wait  *fetchWait

	mu      sync.Mutex
	commits map[int32]int64 // offsets of topic to commit with the open transaction
	waiting []chan bool     // told the open transaction's outcome
}

func newReaderClient(topic string, cl *kgo.Client, gate *pollGate, txn *txnLoop, wait *fetchWait) *ReaderClient {
	return &ReaderClient{topic: topic, cl: cl, gate: gate, txn: txn, wait: wait}
}

// Reread has the client read partitions of the Reader's topic again from
// the offsets given, and then calls reset, which forgets what was read of
// them: no poll runs from before the new offsets until reset returns, so no
// record read from the old ones comes after it, and no callback runs
// meanwhile (the partitions it finds owned stay owned until it returns).
func (c *ReaderClient) Reread(offsets map[int32]int64, reset func()) {
	at := make(map[int32]kgo.EpochOffset, len(offsets))
	for p, o := range offsets {
		at[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	release := c.gate.hold()
	defer release()
	if len(at) > 0 {
		c.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{c.topic: at})
	}
	reset()
}

// Request sends req to broker on the forwarders' client, for a Reader that
// reads its topic with requests of its own (the scheduler's read-backs). A
// broker answers a connection's requests in order, and the client sends
// every fetch on one connection a broker: a fetch sent here waits behind at
// most the forwarders' one fetch in flight there, which waits up to
// Config.FetchMaxWait (100 ms by default) from the time given to
// PromptFrom on, and up to Config.IdleFetchMaxWait (5s) before it.
func (c *ReaderClient) Request(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	return c.cl.Broker(int(broker)).Request(ctx, req)
}

// PromptFrom says from when on the Reader sends requests that must not wait
// behind a long poll (Request): the forwarders' fetches wait
// Config.FetchMaxWait from then on, IdleFetchMaxWait ahead of it
// (fetch_wait.go). The zero time says it sends none until it says again.
// Records fetched for the Reader keep the wait short for a while, so the
// requests that follow right after them need nothing said.
func (c *ReaderClient) PromptFrom(at time.Time) { c.wait.need(c, at) }

// Commit commits offsets of the Reader's topic in the group, so that the
// group's lag shows how far it read: at-least-once at once, exactly-once
// with the open transaction, which it has end within CommitLinger. (The
// scheduler reads from its topic's start whatever is committed: its
// commits are for the lag alone.)
func (c *ReaderClient) Commit(ctx context.Context, offsets map[int32]int64) error {
	if len(offsets) == 0 {
		return nil
	}
	if c.txn != nil {
		_, err := c.Produce(ctx, nil, offsets)
		return err
	}
	at := make(map[int32]kgo.EpochOffset, len(offsets))
	for p, o := range offsets {
		at[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var err error
	c.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.topic: at},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, cerr error) {
			if err = cerr; cerr != nil {
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					err = errors.Join(err, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		})
	return err
}

// errNotTransactional is Produce's error at-least-once.
var errNotTransactional = errors.New("the forwarders' client is not transactional: produce with a client of your own")

// Produce writes records into the process's open transaction, and commits
// offsets of the Reader's topic with it: the commit carries the group's
// generation, so the broker refuses the transaction of a process that lost
// those partitions (KIP-447). It returns once the records are handed to the
// client, with a channel that gets the transaction's outcome: true when it
// committed; false when it aborted, and then nothing of records was written
// (a record that fails aborts it). The channel gets nothing if the
// forwarders stop without ending it (the broker aborts it then).
func (c *ReaderClient) Produce(ctx context.Context, records []*kgo.Record, commit map[int32]int64) (<-chan bool, error) {
	if c.txn == nil {
		return nil, errNotTransactional
	}
	// Shared, as a worker's cycle holds it: End and Begin wait for the
	// records to be handed to the client, and the outcome is this
	// transaction's.
	c.txn.barrier.RLock()
	defer c.txn.barrier.RUnlock()
	outcome := make(chan bool, 1)
	c.mu.Lock()
	if len(commit) > 0 {
		if c.commits == nil {
			c.commits = map[int32]int64{}
		}
		maps.Copy(c.commits, commit)
	}
	c.waiting = append(c.waiting, outcome)
	c.mu.Unlock()
	for _, r := range records {
		c.cl.Produce(ctx, r, nil)
	}
	c.txn.noteProduced(c.txn.cfg.NowFunc())
	return outcome, nil
}

// ended tells the transaction's outcome to every Produce since the last.
func (c *ReaderClient) ended(committed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range c.waiting {
		ch <- committed
	}
	c.waiting = nil
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
