package forwarder

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
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
