package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// readBytes is the most oversized reads of a partition in one fetch: a
// segment. Reading stops at the cut, so a pass reads about what it deletes.
const readBytes = segmentBytes

// oversize is a partition that holds more than its topic's retention.bytes.
type oversize struct {
	topic     string
	partition int32
	cut       int64 // the first record to keep: its start offset, then past what walk passed
	excess    int64 // the bytes it holds beyond retention.bytes, less what walk passed
}

// oversized is, for each partition holding more than its topic's
// retention.bytes, the first record retention.bytes keeps.
//
// Kafka deletes a partition's oldest segments while what is left still
// holds retention.bytes (kfake's ApplyRetention goes on until it holds no
// more, under it by up to a batch); this applies Kafka's rule to batches: it
// deletes the oldest batches while the rest holds retention.bytes, so a
// partition keeps at least retention.bytes and less than that plus one
// batch. Why batches: kfake does not show its segments over Kafka's
// protocol, and DeleteRecords frees each batch it cuts past from memory (a
// segment file from data-dir once its last batch goes, so data-dir holds up
// to a segment more). A batch is the smallest part with a size of its own:
// its records share one encoding, maybe compressed.
//
// In the ingress and the level topics, nothing past kdelay's commit is
// read: hold would keep it anyway.
func (r *retention) oversized(ctx context.Context, policies map[string]policy, held commits) (kadm.Offsets, error) {
	over, err := r.over(ctx, policies)
	if err != nil || len(over) == 0 {
		return nil, err
	}
	var topics []string
	for _, o := range over {
		topics = append(topics, o.topic)
	}
	listed, err := r.adm.ListTopics(ctx, slices.Compact(slices.Sorted(slices.Values(topics)))...)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	cuts := kadm.Offsets{}
	var errs []error
	for _, o := range over {
		bound, ok := held.bound(o.topic, o.partition)
		if !ok {
			bound = math.MaxInt64
		}
		at, err := r.sizeCut(ctx, listed[o.topic].ID, o, bound)
		errs = append(errs, err)
		if err == nil && at > o.cut {
			cuts.AddOffset(o.topic, o.partition, at, -1)
		}
	}
	return cuts, errors.Join(errs...)
}

// over lists the partitions that hold more than their topic's
// retention.bytes. A partition's size is what kfake's DescribeLogDirs
// reports: the wire bytes of its batches from the one holding its start
// offset on (not what data-dir holds), which the batches fetched from the
// start offset add up to, byte for byte.
//
// The start offsets are listed before the sizes: a start moved in between
// (by a DeleteRecords of someone else's) fails the fetch from it, and the
// partition waits for the next pass.
func (r *retention) over(ctx context.Context, policies map[string]policy) ([]oversize, error) {
	var topics []string
	for topic, p := range policies {
		if p.bytes >= 0 {
			topics = append(topics, topic)
		}
	}
	if len(topics) == 0 {
		return nil, nil
	}
	starts, err := r.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list start offsets: %w", err)
	}
	dirs, err := r.adm.DescribeAllLogDirs(ctx, starts.Offsets().TopicsSet())
	if err != nil {
		return nil, fmt.Errorf("describe log dirs: %w", err)
	}
	var over []oversize
	errs := []error{starts.Error()}
	dirs.Each(func(d kadm.DescribedLogDir) {
		errs = append(errs, d.Err)
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			limit := policies[p.Topic].bytes
			if s, ok := starts.Lookup(p.Topic, p.Partition); ok && s.Err == nil && p.Size > limit {
				over = append(over, oversize{p.Topic, p.Partition, s.Offset, p.Size - limit})
			}
		})
	})
	return over, errors.Join(errs...)
}

// sizeCut is where o is cut: past its oldest batches that together fit in
// its excess, or past the first of them to reach bound.
func (r *retention) sizeCut(ctx context.Context, id kadm.TopicID, o oversize, bound int64) (int64, error) {
	for o.cut < bound {
		raw, err := r.fetch(ctx, id, o.topic, o.partition, o.cut)
		if err != nil {
			return o.cut, err
		}
		if done, err := o.walk(raw, bound); done || err != nil {
			return o.cut, err
		}
	}
	return o.cut, nil
}

// walk moves o's cut past the batches in raw, fetched from the cut on, while
// they fit in its excess and the cut is short of bound; done is when the
// next batch does not fit, or raw holds none.
func (o *oversize) walk(raw []byte, bound int64) (done bool, err error) {
	if len(raw) == 0 {
		return true, nil
	}
	for len(raw) > 0 && o.cut < bound {
		var b kmsg.RecordBatch
		if err := b.ReadFrom(raw); err != nil {
			return true, fmt.Errorf("read a batch of %s/%d@%d: %w", o.topic, o.partition, o.cut, err)
		}
		size := 12 + int64(b.Length) // FirstOffset and Length come before what Length counts
		if size > o.excess {
			return true, nil
		}
		o.excess -= size
		o.cut = b.FirstOffset + int64(b.LastOffsetDelta) + 1
		raw = raw[size:]
	}
	return false, nil
}

// fetch reads partition p of topic from offset on: at least the batch
// holding offset, and whole batches up to readBytes.
func (r *retention) fetch(ctx context.Context, id kadm.TopicID, topic string, p int32, offset int64) ([]byte, error) {
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, readBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id // by name up to v12, by ID from v13
	rt.Partitions = append(rt.Partitions, rp)
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.Topics = readBytes, append(req.Topics, rt) // MaxWaitMillis 0: no waiting
	resp, err := req.RequestWith(ctx, r.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = errors.New("the broker answered for other partitions")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch %s/%d@%d: %w", topic, p, offset, err)
	}
	return resp.Topics[0].Partitions[0].RecordBatches, nil
}
