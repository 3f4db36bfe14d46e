package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/config"
)

const (
	// progressEvery is how often a long read of the DLQ says how far it got.
	progressEvery = 2 * time.Second

	// idleTimeout stops a read of the DLQ that gets no record for this long
	// though it has not reached the end offsets it set out to: the last
	// offsets of a partition can hold no record a consumer sees (a
	// transaction marker), and a read must end.
	idleTimeout = 10 * time.Second
)

// readDLQ calls each for every record of topic up to the end offsets it
// has when the read starts: records dead-lettered meanwhile are left for
// the next run, so a read ends even while kdelay keeps writing. It says how
// far it got on progress every progressEvery.
func readDLQ(ctx context.Context, cfg config.Config, adm *kadm.Client, topic string, progress io.Writer, each func(deadLetter)) error {
	from, to, total, err := dlqBounds(ctx, adm, topic, cfg)
	if err != nil || total == 0 {
		return err
	}
	offsets := map[int32]kgo.Offset{}
	for p, at := range from {
		offsets[p] = kgo.NewOffset().At(at)
	}
	cl, err := newClient(cfg, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
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
			return fmt.Errorf("read %s: no record for %s with %d of %d records read; run it again", topic, idleTimeout, read, total)
		}
		if err := fatal(fetches); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if end, ok := to[r.Partition]; !ok || r.Offset >= end {
				return
			}
			read++
			each(readDeadLetter(r))
			if r.Offset >= to[r.Partition]-1 {
				delete(from, r.Partition)
				cl.PauseFetchPartitions(map[string][]int32{topic: {r.Partition}})
			}
		})
		if time.Since(lastSaid) >= progressEvery {
			fmt.Fprintf(progress, "read %d of %d records of %s\n", read, total, topic)
			lastSaid = time.Now()
		}
	}
	return nil
}

// dlqBounds are the offsets to read topic from and up to, by partition, for
// the partitions that hold records, and how many records that is.
func dlqBounds(ctx context.Context, adm *kadm.Client, topic string, cfg config.Config) (from, to map[int32]int64, total int64, err error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, nil, 0, fmt.Errorf("topic %s does not exist on %s: check --topic-prefix, or start kdelay serve (it creates it)", topic, strings.Join(cfg.Seeds(), ","))
	} else if err != nil {
		return nil, nil, 0, fmt.Errorf("list start offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
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
