package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	// progressEvery is how often a long read of the DLQ says how far it got.
	progressEvery = 2 * time.Second

	// idleTimeout stops a read of the DLQ that gets no record for this long
	// though it has not reached the end offsets it set out to: a
	// transaction left open holds back what follows it from a
	// read-committed reader, and a read must end.
	idleTimeout = 10 * time.Second
)

// Progress is how far a long read got: records read of those it set out to
// read.
type Progress func(read, total int64)

// DeadLetters calls each for every record of the dead-letter topic up to the
// end offsets it has when the read starts: records dead-lettered meanwhile
// are left for the next read, so a read ends even while kdelay keeps writing.
// It calls progress, when not nil, every 2s.
func (f *Fleet) DeadLetters(ctx context.Context, progress Progress, each func(DeadLetter)) error {
	topic := f.cfg.Topics.DLQ()
	from, to, total, err := f.dlqBounds(ctx, topic)
	if err != nil || total == 0 {
		return err
	}
	return f.readDLQ(ctx, topic, from, to, total, progress, each)
}

// Newest is the newest dead letters, and how many there are in all.
type Newest struct {
	Letters []DeadLetter // newest first, by timestamp
	// Total is how many records the dead-letter topic holds, counted by
	// its offsets: a transaction marker counts as one.
	Total int64
	// All is whether Letters are every dead letter of the topic.
	All bool
}

// NewestDeadLetters reads the newest n dead letters, and counts the rest
// without reading them. It reads the last n offsets of each partition, so
// at most n records a partition, and keeps the newest n of those by
// timestamp: the newest n of the topic, since a partition's timestamps rise
// with its offsets as kdelay writes them. A transaction marker, or the dead
// letter of an aborted transaction, among the last n offsets of a partition
// takes a record's place, so a partition of an exactly-once fleet may give
// a few less.
func (f *Fleet) NewestDeadLetters(ctx context.Context, n int) (Newest, error) {
	topic := f.cfg.Topics.DLQ()
	from, to, total, err := f.dlqBounds(ctx, topic)
	if err != nil || total == 0 {
		return Newest{All: true}, err
	}
	out := Newest{Total: total, All: true}
	var read int64
	for p := range from {
		if to[p]-from[p] > int64(n) {
			from[p], out.All = to[p]-int64(n), false
		}
		read += to[p] - from[p]
	}
	err = f.readDLQ(ctx, topic, from, to, read, nil, func(d DeadLetter) { out.Letters = append(out.Letters, d) })
	if err != nil {
		return Newest{}, err
	}
	slices.SortFunc(out.Letters, newestFirst)
	if len(out.Letters) > n {
		out.Letters, out.All = out.Letters[:n], false
	}
	return out, nil
}

// newestFirst orders dead letters by timestamp, the newest first; those
// of one millisecond by partition, then offset, the last first.
func newestFirst(a, b DeadLetter) int {
	return cmp.Or(b.Record.Timestamp.Compare(a.Record.Timestamp),
		cmp.Compare(a.Record.Partition, b.Record.Partition), cmp.Compare(b.Record.Offset, a.Record.Offset))
}

// readDLQ calls each for every record of topic from the offsets from up to
// to, by partition: total records.
func (f *Fleet) readDLQ(ctx context.Context, topic string, from, to map[int32]int64, total int64, progress Progress, each func(DeadLetter)) error {
	offsets := map[int32]kgo.Offset{}
	for p, at := range from {
		offsets[p] = kgo.NewOffset().At(at)
	}
	// Read committed: in exactly-once delivery kdelay dead-letters in its
	// transactions, and the dead letter of one aborted was never written,
	// so it is neither listed nor replayed. With the transaction markers
	// kept, so that a partition that ends with one is seen to end.
	cl, err := f.cfg.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer cl.Close()
	var read int64
	lastSaid := time.Now()
	for len(from) > 0 {
		pollCtx, cancel := context.WithTimeout(ctx, idleTimeout)
		fetches := cl.PollFetches(pollCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case pollCtx.Err() != nil && fetches.NumRecords() == 0:
			return fmt.Errorf("read %s: no record for %s with %d of %d records read; read it again", topic, idleTimeout, read, total)
		}
		if err := FetchErr(fetches); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := to[r.Partition]
			if !ok {
				return
			}
			if r.Offset < end {
				read++
				if !r.Attrs.IsControl() {
					each(ReadDeadLetter(r))
				}
			}
			// Past the end counts too: the broker writes a transaction's
			// markers after the end offset was listed, so a partition
			// listed as ending with an aborted record, which read
			// committed skips, ends with its marker past the end.
			if _, reading := from[r.Partition]; reading && r.Offset >= end-1 {
				delete(from, r.Partition)
				cl.PauseFetchPartitions(map[string][]int32{topic: {r.Partition}})
			}
		})
		if progress != nil && time.Since(lastSaid) >= progressEvery {
			progress(read, total)
			lastSaid = time.Now()
		}
	}
	return nil
}

// dlqBounds are the offsets to read topic from and up to, by partition, for
// the partitions that hold records, and how many records that is.
func (f *Fleet) dlqBounds(ctx context.Context, topic string) (from, to map[int32]int64, total int64, err error) {
	starts, err := f.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, nil, 0, &MissingTopicError{Topic: topic, Brokers: f.cfg.Brokers}
	} else if err != nil {
		return nil, nil, 0, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := f.adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	from, to = map[int32]int64{}, map[int32]int64{}
	ends.Each(func(end kadm.ListedOffset) {
		start, _ := starts.Lookup(topic, end.Partition)
		if end.Offset > start.Offset {
			from[end.Partition], to[end.Partition] = start.Offset, end.Offset
			total += end.Offset - start.Offset
		}
	})
	return from, to, total, nil
}

// FetchErr is the first error of fetches that ends a read: the client
// closed, a partition refused or failed. A cancelled fetch is not one.
func FetchErr(fetches kgo.Fetches) error {
	if fetches.IsClientClosed() {
		return errors.New("kafka client closed")
	}
	var err error
	fetches.EachError(func(topic string, p int32, e error) {
		switch {
		case err != nil || errors.Is(e, context.Canceled):
		case errors.Is(e, kerr.TopicAuthorizationFailed):
			err = fmt.Errorf("consume %s/%d: %w; the broker's ACLs must allow kdelay's principal READ on %s", topic, p, e, topic)
		default:
			err = fmt.Errorf("consume %s/%d: %w", topic, p, e)
		}
	})
	return err
}
