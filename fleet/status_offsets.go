package fleet

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kdelay/kdelay/stages"
)

// offsets are the Kafka offsets pending records are counted by (package
// stages counts them, as the pending gauge and the drain check do) and the
// groups' members, read once for every stage.
type offsets struct {
	stages.Offsets
	groups kadm.DescribedGroups
}

func readOffsets(ctx context.Context, adm *kadm.Client, ss []Stage) (offsets, error) {
	var o offsets
	var err error
	if o.Offsets, err = stages.ReadOffsets(ctx, adm, ss); err != nil {
		return o, err
	}
	var groups []string
	for _, s := range ss {
		groups = append(groups, s.Group)
	}
	if o.groups, err = adm.DescribeGroups(ctx, groups...); err != nil {
		return o, fmt.Errorf("describe groups %s: %w", strings.Join(groups, ","), err)
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
	missing := false
	for p, end := range o.Ends[s.Topic] {
		switch {
		case p < 0:
			missing = true
		case end.Err == nil:
			ls.Partitions++
		}
	}
	pending, err := o.Pending(s)
	switch {
	case missing:
		problems = append(problems, "topic does not exist: check the topic prefix and levels, or start kdelay serve with them (it creates its topics)")
	case err != nil:
		problems = append(problems, err.Error())
	}
	ls.Pending = pending
	ls.Problem = strings.Join(problems, "; ")
	return ls
}

// positions are the partitions with pending records and the offset of their
// head, by topic.
func (o offsets) positions(ss []Stage) map[string]map[int32]int64 {
	heads := map[string]map[int32]int64{}
	for _, s := range ss {
		for p, end := range o.Ends[s.Topic] {
			// A position not known is a problem Pending reports.
			if at, _ := o.Position(s, p); at >= 0 && end.Err == nil && end.Offset > at {
				if heads[s.Topic] == nil {
					heads[s.Topic] = map[int32]int64{}
				}
				heads[s.Topic][p] = at
			}
		}
	}
	return heads
}
