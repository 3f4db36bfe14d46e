package forwarder

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stageClient is everything a worker asks of Kafka, scoped to its source
// topic: the worker names partitions by number, and the client names them by
// topic and number. It is the one place that knows which client serves the
// stage, so that several stages can come to share one client and one
// consumer group (docs/design/one-client.md) without the worker changing.
//
// Pausing, resuming and setting offsets touch only the source's partitions,
// which is what lets stages share a client: its paused set and its offsets
// are per topic and partition.
type stageClient struct {
	kafka  *kgo.Client
	source string
	gate   *pollGate           // shared by every stageClient of kafka
	hold   *pollHold           // shared likewise; nil on a stage's own client, which pauses instead
	wait   *fetchWait          // shared likewise; nil on a stage's own client, whose fetches wait FetchMaxWait
	own    bool                // the stage's own client, which it polls and closes; else the Forwarder does
	closed sync.Once           // kafka is closed once: see close
	land   func(*entry, error) // the worker's, given each entry's outcome (produce)

	// flying counts the stage's records produced and not yet answered;
	// landed is closed when it falls to 0 while flush waits (see flush).
	// era splits them by when they were produced (see newEra): eraFlying
	// counts them by era, eraLanded is closed when an era's count falls to
	// 0 while newEra's caller waits.
	mu        sync.Mutex
	flying    int
	landed    chan struct{}
	era       int
	eraFlying [2]int
	eraLanded [2]chan struct{}
}

func newStageClient(kafka *kgo.Client, source string, gate *pollGate, own bool, land func(*entry, error)) *stageClient {
	return &stageClient{kafka: kafka, source: source, gate: gate, own: own, land: land}
}

// pause stops fetching the partitions ids of the source until resume; a
// fetch already buffered for them is dropped rather than returned.
func (c *stageClient) pause(ids ...int32) {
	c.kafka.PauseFetchPartitions(map[string][]int32{c.source: ids})
}

// resume fetches the partitions ids of the source again.
func (c *stageClient) resume(ids ...int32) {
	c.kafka.ResumeFetchPartitions(map[string][]int32{c.source: ids})
}

// pauseSource stops fetching the whole source, on top of the partitions
// paused one by one; resumeSource undoes it and leaves those paused.
func (c *stageClient) pauseSource()  { c.kafka.PauseFetchTopics(c.source) }
func (c *stageClient) resumeSource() { c.kafka.ResumeFetchTopics(c.source) }

// produce hands r, e's record, to the client; land is called once with the
// outcome. It never blocks: a client holding MaxBufferedRecords already
// fails r at once with kgo.ErrMaxBuffered, which the worker retries after a
// backoff (applyAcks). A blocking Produce would wait under the worker's lock
// for a target that may never answer, and since stages share a client, hold
// back every stage's loop with it.
//
// One callback both tells the worker and counts the record answered: every
// record forwarded comes here, and each closure is an allocation.
func (c *stageClient) produce(r *kgo.Record, e *entry) {
	era := c.sent()
	c.kafka.TryProduce(context.Background(), r, func(_ *kgo.Record, err error) {
		c.land(e, err)
		c.answered(era)
	})
}

// produceFunc is produce for a record that is no entry's: promise is called
// once with the outcome.
func (c *stageClient) produceFunc(r *kgo.Record, promise func(error)) {
	era := c.sent()
	c.kafka.TryProduce(context.Background(), r, func(_ *kgo.Record, err error) {
		promise(err)
		c.answered(era)
	})
}

// sent counts a record in flight, and returns its era.
func (c *stageClient) sent() (era int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.flying++
	c.eraFlying[c.era]++
	return c.era
}

// answered counts a record of era out of flight, once its outcome is told.
func (c *stageClient) answered(era int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flying--; c.flying == 0 && c.landed != nil {
		close(c.landed)
		c.landed = nil
	}
	if c.eraFlying[era]--; c.eraFlying[era] == 0 && c.eraLanded[era] != nil {
		close(c.eraLanded[era])
		c.eraLanded[era] = nil
	}
}

// newEra starts a new era of the stage's produces and returns a channel
// closed once every record produced before it has its outcome, nil if none
// is in flight: the stage goes on producing meanwhile, and what it produces
// is not waited for. Called by one goroutine at a time (the transaction
// loop), between flushes of everything: eras alternate between two counts,
// so a record left in flight by a flush that gave up is waited for one era
// later, which only makes the wait longer.
func (c *stageClient) newEra() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	era := c.era
	c.era = 1 - era
	if c.eraFlying[era] == 0 {
		return nil
	}
	if c.eraLanded[era] == nil {
		c.eraLanded[era] = make(chan struct{})
	}
	return c.eraLanded[era]
}

// flush waits until every record the stage produced so far has its outcome,
// or ctx ends. Not the client's Flush, which waits until the client holds no
// record at all: with stages sharing a client, the others go on producing,
// and under a steady load that may never come.
func (c *stageClient) flush(ctx context.Context) error {
	c.mu.Lock()
	if c.flying == 0 {
		c.mu.Unlock()
		return nil
	}
	if c.landed == nil {
		c.landed = make(chan struct{})
	}
	landed := c.landed
	c.mu.Unlock()
	select {
	case <-landed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commit commits offsets for the source's partitions in the stage's group
// and waits for the answer, after any commit in flight: the client sends one
// at a time.
func (c *stageClient) commit(ctx context.Context, offsets map[int32]kgo.EpochOffset) (*kmsg.OffsetCommitResponse, error) {
	var resp *kmsg.OffsetCommitResponse
	var err error
	c.kafka.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{c.source: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, r *kmsg.OffsetCommitResponse, e error) {
			resp, err = r, e
		})
	return resp, err
}

// poll waits for fetched records until ctx ends. With BlockRebalanceOnPoll,
// no rebalance runs from its return until allowRebalance. Only the client's
// poll loop calls it, inside gate.
func (c *stageClient) poll(ctx context.Context) kgo.Fetches { return c.kafka.PollFetches(ctx) }

// allowRebalance lets a rebalance held back by the last poll go on.
func (c *stageClient) allowRebalance() { c.kafka.AllowRebalance() }

// admin is an admin client over the same connections, for the stage's
// group and topics.
func (c *stageClient) admin() *kadm.Client { return kadm.NewClient(c.kafka) }

// close closes the client, letting a rebalance held back by a poll go on
// first, so that the group callbacks run before it is gone. A second close
// waits for the first and does nothing: franz-go's Close must not run twice
// at once (its fetch sessions are killed unguarded, source.go
// killSessionOnClose).
// A client shared by stages is the Forwarder's to close, after every stage
// stopped.
func (c *stageClient) close() {
	if c.own {
		c.closed.Do(c.kafka.CloseAllowingRebalance)
	}
}
