package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchBytes is what one fetch returns at most (unless its first batch is
// larger), loading or reading back. Compressed: schedules written together
// compress well (a 178-byte record to 20, their keys, headers and values
// alike), and decoded, a record costs several times its bytes (kgo.Record,
// its headers), so a fetch of 1 MiB of them held 25 MB; loading holds two
// (one applied, one fetched), and with 4 MiB serve's RSS peaked at 136 to
// 182 MiB loading a million schedules whose index takes 66.
const fetchBytes = 256 << 10

// errMissing is what a read back finds at an offset with no committed
// record: one before the partition's start (trimmed, compact.go), one the
// broker's compaction removed, one of an aborted transaction, a transaction
// marker, or one past the committed end. The scheduler read a committed
// record there when it loaded the partition, so the partition changed
// under it: it loads it again.
var errMissing = errors.New("no committed record at this offset")

// reader reads back the records of the schedules topic at offsets the
// scheduler's index names (docs/design/schedules-at-scale.md): what a slot
// does not keep, a schedule's value, headers and fields, is read again when
// an occurrence is written.
//
// It sends its own fetch requests to the partition's leader, read_committed,
// and decodes them with kgo.ProcessFetchPartition, rather than consume with
// the client (AddConsumePartitions, which a client with no group would
// take): a fetch answer says how far it read, aborted records and
// transaction markers included, and a consumer says nothing of a fetch that
// held no record it returns. A partition whose last records are a
// transaction aborted without its marker (what kdelay's embedded broker
// leaves after a SIGKILL, hidden_tail_test.go) gives a consumer nothing for
// ever at those offsets; here it gives errMissing at once.
type reader struct {
	adm      *kadm.Client // asks where a partition is led
	send     sendFunc     // sends its fetches
	topic    string
	maxBytes int32 // a fetch's, of the partition
	stats    readStats
}

// sendFunc sends req to broker and returns its answer.
type sendFunc func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error)

// sendOn sends on cl: Kafka answers the requests of one connection in
// order, and a client sends every fetch on one connection to a broker, so
// a fetch waits behind at most the one cl's consumer has there, up to its
// FetchMaxWait.
func sendOn(cl *kgo.Client) sendFunc {
	return func(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
		return cl.Broker(int(broker)).Request(ctx, req)
	}
}

// readStats count what reads cost: fetches, those of them that did not go
// on where the one before ended, and the offsets they spanned.
type readStats struct {
	fetches int
	seeks   int
	spanned int64
}

func newReader(cl *kgo.Client, topic string, maxBytes int32) *reader {
	return &reader{adm: kadm.NewClient(cl), send: sendOn(cl), topic: topic, maxBytes: maxBytes}
}

// read calls fn with the committed record at each of offsets, ascending, of
// partition p, in their order. fn's record is a view of the fetched bytes:
// what it keeps it copies (detach). An offset with no committed record ends
// the read with an error wrapping errMissing; a fetch that fails ends it
// with that error. Either way the records before it were given to fn.
//
// It sweeps the partition forward, and seeks only past a gap: the next
// fetch starts where the last ended, unless the next offset wanted is
// further on than the last fetch reached from where it started. So offsets
// closer than a fetch cost one sweep, however many they are, and no fetch
// reads what another read: at most one fetch per offset wanted, and at most
// one read of the partition.
func (r *reader) read(ctx context.Context, p int32, offsets []int64, fn func(*kgo.Record)) error {
	if len(offsets) == 0 {
		return nil
	}
	if !slices.IsSorted(offsets) {
		return fmt.Errorf("read %s/%d: offsets not ascending", r.topic, p)
	}
	leader, err := r.leader(ctx, p)
	if err != nil {
		return err
	}
	cursor, span := int64(-1), int64(0)
	for i := 0; i < len(offsets); {
		at := cursor
		if cursor < 0 || offsets[i] >= cursor+span {
			at = offsets[i] // a seek: the gap is more than a fetch
			r.stats.seeks++
		}
		recs, next, err := r.fetch(ctx, leader, p, at)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if offsets[i] < rec.Offset {
				break
			}
			for i < len(offsets) && offsets[i] == rec.Offset {
				fn(rec)
				i++
			}
			if i == len(offsets) {
				return nil
			}
		}
		switch {
		case offsets[i] < next:
			return fmt.Errorf("read %s/%d@%d: %w (the fetch from %d read to %d)", r.topic, p, offsets[i], errMissing, at, next)
		case next == at:
			return fmt.Errorf("read %s/%d@%d: %w (the committed records end at %d)", r.topic, p, offsets[i], errMissing, at)
		}
		cursor, span = next, next-at
	}
	return nil
}

// partitionLeader is where a partition's fetches go: its leader and its
// topic's id, which fetches of version 13 on name it by.
type partitionLeader struct {
	broker  int32
	topicID kadm.TopicID
}

// leader asks the cluster where partition p is led now: a read is rare
// (once per step with occurrences due), and a leader cached from the last
// would fail this one after a move.
func (r *reader) leader(ctx context.Context, p int32) (partitionLeader, error) {
	md, err := r.adm.Metadata(ctx, r.topic)
	if err != nil {
		return partitionLeader{}, fmt.Errorf("read %s/%d: metadata: %w", r.topic, p, err)
	}
	td, ok := md.Topics[r.topic]
	if ok && td.Err != nil {
		err = td.Err
	}
	pd, ok := td.Partitions[p]
	switch {
	case err != nil:
	case !ok:
		err = kerr.UnknownTopicOrPartition
	case pd.Err != nil:
		err = pd.Err
	case pd.Leader < 0:
		err = kerr.LeaderNotAvailable
	}
	if err != nil {
		return partitionLeader{}, fmt.Errorf("read %s/%d: %w", r.topic, p, err)
	}
	return partitionLeader{broker: pd.Leader, topicID: td.ID}, nil
}

// fetch reads partition p from offset at, read_committed, and returns its
// committed records from at on and the offset after the last batch the
// answer held, aborted and control batches included. An answer with no
// batch is the committed end: next is at.
func (r *reader) fetch(ctx context.Context, l partitionLeader, p int32, at int64) (recs []*kgo.Record, next int64, err error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 0 // what is there now: nothing means the end
	req.MaxBytes = r.maxBytes
	req.IsolationLevel = 1
	req.SessionEpoch = -1 // no fetch session
	t := kmsg.NewFetchRequestTopic()
	t.Topic, t.TopicID = r.topic, l.topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, at, r.maxBytes
	t.Partitions = append(t.Partitions, fp)
	req.Topics = append(req.Topics, t)
	r.stats.fetches++
	resp, err := r.send(ctx, l.broker, req)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s/%d@%d: %w", r.topic, p, at, err)
	}
	rp, err := fetchedPartition(resp.(*kmsg.FetchResponse), p)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s/%d@%d: %w", r.topic, p, at, err)
	}
	got, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: at, IsolationLevel: kgo.ReadCommitted(),
		Topic: r.topic, Partition: p}, rp, kgo.DefaultDecompressor(), nil)
	switch {
	case errors.Is(got.Err, kerr.OffsetOutOfRange):
		return nil, 0, fmt.Errorf("read %s/%d@%d: %w (the partition holds %d to %d)", r.topic, p, at, errMissing, got.LogStartOffset, got.HighWatermark)
	case got.Err != nil:
		return nil, 0, fmt.Errorf("read %s/%d@%d: %w", r.topic, p, at, got.Err)
	case len(rp.RecordBatches) > 0 && next <= at:
		return nil, 0, fmt.Errorf("read %s/%d@%d: a fetch of %d bytes held no whole batch", r.topic, p, at, len(rp.RecordBatches))
	}
	next = max(next, at)
	r.stats.spanned += next - at
	return got.Records, next, nil
}

// fetchedPartition is partition p's part of a fetch answer of one.
func fetchedPartition(resp *kmsg.FetchResponse, p int32) (*kmsg.FetchResponseTopicPartition, error) {
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if rp := &resp.Topics[i].Partitions[j]; rp.Partition == p {
				return rp, nil
			}
		}
	}
	return nil, errors.New("the answer has no such partition")
}
