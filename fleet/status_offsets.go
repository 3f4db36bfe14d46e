package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// offsets are the Kafka offsets pending records are counted by, read once
// for every stage.
type offsets struct {
	starts, ends kadm.ListedOffsets
	commits      map[string]kadm.OffsetResponses // by group
	commitErrs   map[string]error
	groups       kadm.DescribedGroups
}

func readOffsets(ctx context.Context, adm *kadm.Client, ss []Stage) (offsets, error) {
	o := offsets{commits: map[string]kadm.OffsetResponses{}, commitErrs: map[string]error{}}
	var topics, groups []string
	for _, s := range ss {
		topics, groups = append(topics, s.Topic), append(groups, s.Group)
	}
	var err error
	if o.starts, err = adm.ListStartOffsets(ctx, topics...); err != nil {
		return o, fmt.Errorf("list start offsets of %s: %w", strings.Join(topics, ","), err)
	}
	if o.ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
		return o, fmt.Errorf("list end offsets of %s: %w", strings.Join(topics, ","), err)
	}
	if o.groups, err = adm.DescribeGroups(ctx, groups...); err != nil {
		return o, fmt.Errorf("describe groups %s: %w", strings.Join(groups, ","), err)
	}
	for _, g := range groups {
		o.commits[g], err = adm.FetchOffsets(ctx, g)
		if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			o.commitErrs[g] = err
		}
	}
	return o, nil
}

// status is s's line without its head: partitions, pending records and the
// group's members.
func (o offsets) status(s Stage) LevelStatus {
	ls := LevelStatus{Level: s.Name, Topic: s.Topic, Group: s.Group, Configured: s.Configured, Wait: s.Wait}
	var problems []string
	g, ok := o.groups[s.Group]
	state, err := groupState(g, ok)
	if err != nil {
		problems = append(problems, fmt.Sprintf("describe group %s: %v", s.Group, err))
	}
	ls.State, ls.Members, ls.Owners = state, len(g.Members), owners(g, s.Topic)
	if err := o.commitErrs[s.Group]; err != nil {
		problems = append(problems, fmt.Sprintf("committed offsets of %s: %v; pending counts from the start", s.Group, err))
	}
	ends := o.ends[s.Topic]
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		switch end := ends[p]; {
		case errors.Is(end.Err, kerr.UnknownTopicOrPartition) && p < 0:
			problems = append(problems, "topic does not exist: check the topic prefix and levels, or start kdelay serve with them (it creates its topics)")
		case end.Err != nil:
			problems = append(problems, fmt.Sprintf("partition %d: %v", p, end.Err))
		default:
			ls.Partitions++
		}
	}
	ls.Pending = o.pending(s)
	ls.Problem = strings.Join(problems, "; ")
	return ls
}

// position is the offset s's group reads partition p from next: its
// committed offset, or the partition's start when it never committed (where
// a forwarder begins) or the records it committed up to were deleted.
func (o offsets) position(s Stage, p int32) int64 {
	next := o.starts[s.Topic][p].Offset
	if c, ok := o.commits[s.Group].Lookup(s.Topic, p); ok && c.Err == nil {
		next = max(next, c.At)
	}
	return next
}

// positions are the partitions with pending records and the offset of their
// head, by topic.
func (o offsets) positions(ss []Stage) map[string]map[int32]int64 {
	heads := map[string]map[int32]int64{}
	for _, s := range ss {
		for p, end := range o.ends[s.Topic] {
			if at := o.position(s, p); end.Err == nil && end.Offset > at {
				if heads[s.Topic] == nil {
					heads[s.Topic] = map[int32]int64{}
				}
				heads[s.Topic][p] = at
			}
		}
	}
	return heads
}
