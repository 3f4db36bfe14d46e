package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ingressCopies reads the scenario's ingress from its start to its end and
// counts the records of each id the driver wrote: a duplicate the producer
// wrote is not one kdelay made, and the report tells them apart. A copy
// kdelay wrote itself (a held record handed back as its partition moved) is
// not counted: it is how kdelay hands a record on, and delivered twice it
// would be kdelay's duplicate.
func (r *faultRun) ingressCopies(ctx context.Context) (map[int]int32, error) {
	if r.s == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := r.c.adm.ListEndOffsets(ctx, r.s.ingress)
	if err != nil {
		return nil, fmt.Errorf("read the ingress's end: %w", err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(r.c.brokers...),
		kgo.ConsumeTopics(r.s.ingress),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, r.c.opts...)...)
	if err != nil {
		return nil, fmt.Errorf("read the ingress: %w", err)
	}
	defer cl.Close()
	copies := map[int]int32{}
	for len(remaining) > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return copies, fmt.Errorf("read the ingress: %d partitions not read to their end within 30s", len(remaining))
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			if id, err := strconv.Atoi(string(rec.Key)); err == nil && r.s.wrote(rec.ProducerID) {
				copies[id]++
			}
			if end, ok := remaining[rec.Partition]; ok && rec.Offset+1 >= end {
				delete(remaining, rec.Partition)
			}
		})
	}
	return copies, nil
}
