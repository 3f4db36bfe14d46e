package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// headTimeout bounds how long Status waits for the head records: one fetch
// per partition, answered at once by a broker that has them.
const headTimeout = 10 * time.Second

// heads are the timestamps of the records at the groups' positions, by topic
// and partition, and the partitions whose head could not be read.
type heads struct {
	want map[string]map[int32]int64
	got  map[string]map[int32]time.Time
	err  error // why some were not read
}

// readHeads reads the record at each position in want with a consumer of
// its own, outside any group, so it moves no committed offset.
func readHeads(ctx context.Context, cfg Config, want map[string]map[int32]int64) heads {
	h := heads{want: want, got: map[string]map[int32]time.Time{}}
	total, offsets := 0, map[string]map[int32]kgo.Offset{}
	for topic, ps := range want {
		offsets[topic] = map[int32]kgo.Offset{}
		for p, at := range ps {
			offsets[topic][p] = kgo.NewOffset().At(at)
			total++
		}
	}
	if total == 0 {
		return h
	}
	cl, err := cfg.client(kgo.ConsumePartitions(offsets),
		// A head is one record: fetch little beyond it.
		kgo.FetchMaxPartitionBytes(64<<10), kgo.FetchMaxBytes(4<<20))
	if err != nil {
		h.err = err
		return h
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, headTimeout)
	defer cancel()
	for n := 0; n < total && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 || h.has(p.Topic, p.Partition) {
				return
			}
			if h.got[p.Topic] == nil {
				h.got[p.Topic] = map[int32]time.Time{}
			}
			h.got[p.Topic][p.Partition] = p.Records[0].Timestamp
			cl.PauseFetchPartitions(map[string][]int32{p.Topic: {p.Partition}})
			n++
		})
	}
	if ctx.Err() != nil {
		h.err = fmt.Errorf("not read within %s", headTimeout)
	}
	return h
}

func (h heads) has(topic string, p int32) bool {
	_, ok := h.got[topic][p]
	return ok
}

// apply sets ls's oldest due time and head lateness. A head leaves its topic
// at its timestamp plus the stage's wait; one stamped in the future (its
// writer's clock is ahead) leaves as soon as it is the head, as the
// forwarder treats it (it does not trust a time to come).
func (h heads) apply(ls *LevelStatus, s Stage, now time.Time) {
	var oldest time.Time
	unread := 0
	for p := range h.want[s.Topic] {
		ts, ok := h.got[s.Topic][p]
		if !ok {
			unread++
			continue
		}
		due := ts.Add(s.Wait)
		if ts.After(now) {
			due = now
		}
		if oldest.IsZero() || due.Before(oldest) {
			oldest = due
		}
	}
	if !oldest.IsZero() {
		late := now.Sub(oldest).Seconds()
		ls.OldestDue, ls.HeadLateness = &oldest, &late
	}
	if unread > 0 {
		msg := fmt.Sprintf("head of %s with records: %v", plural(unread, "partition"), h.err)
		ls.Problem = strings.TrimPrefix(ls.Problem+"; "+msg, "; ")
	}
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
