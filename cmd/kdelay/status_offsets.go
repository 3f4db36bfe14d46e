package main

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

// offsets are the Kafka offsets status counts pending records by, read once
// for every stage.
type offsets struct {
	starts, ends kadm.ListedOffsets
	commits      map[string]kadm.OffsetResponses // by group
	commitErrs   map[string]error
	groups       kadm.DescribedGroups
}

func readOffsets(ctx context.Context, adm *kadm.Client, ss []stage) (offsets, error) {
	o := offsets{commits: map[string]kadm.OffsetResponses{}, commitErrs: map[string]error{}}
	var topics, groups []string
	for _, s := range ss {
		topics, groups = append(topics, s.topic), append(groups, s.group)
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
func (o offsets) status(s stage) levelStatus {
	ls := levelStatus{Level: s.name, Topic: s.topic, Group: s.group, Configured: s.configured}
	var problems []string
	g, ok := o.groups[s.group]
	state, err := groupState(g, ok)
	if err != nil {
		problems = append(problems, fmt.Sprintf("describe group %s: %v", s.group, err))
	}
	ls.State, ls.Members = state, len(g.Members)
	if err := o.commitErrs[s.group]; err != nil {
		problems = append(problems, fmt.Sprintf("committed offsets of %s: %v; pending counts from the start", s.group, err))
	}
	ends := o.ends[s.topic]
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		switch end := ends[p]; {
		case errors.Is(end.Err, kerr.UnknownTopicOrPartition) && p < 0:
			problems = append(problems, "topic does not exist: check --topic-prefix and --levels, or start kdelay serve with them")
		case end.Err != nil:
			problems = append(problems, fmt.Sprintf("partition %d: %v", p, end.Err))
		default:
			ls.Partitions++
			ls.Pending += max(end.Offset-o.position(s, p), 0)
		}
	}
	ls.Problem = strings.Join(problems, "; ")
	return ls
}

// position is the offset s's group reads partition p from next: its
// committed offset, or the partition's start when it never committed (where
// a forwarder begins) or the records it committed up to were deleted.
func (o offsets) position(s stage, p int32) int64 {
	next := o.starts[s.topic][p].Offset
	if c, ok := o.commits[s.group].Lookup(s.topic, p); ok && c.Err == nil {
		next = max(next, c.At)
	}
	return next
}

// positions are the partitions with pending records and the offset of their
// head, by topic.
func (o offsets) positions(ss []stage) map[string]map[int32]int64 {
	heads := map[string]map[int32]int64{}
	for _, s := range ss {
		for p, end := range o.ends[s.topic] {
			if at := o.position(s, p); end.Err == nil && end.Offset > at {
				if heads[s.topic] == nil {
					heads[s.topic] = map[int32]int64{}
				}
				heads[s.topic][p] = at
			}
		}
	}
	return heads
}
