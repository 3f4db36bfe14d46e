package fleet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kdelay/kdelay/schedule"
)

// ScheduleStatus is what `kdelay status` shows of the recurring schedules,
// read from the schedules topic to its end, as `kdelay schedule list`
// reads it.
type ScheduleStatus struct {
	Topic     string `json:"topic"`
	Group     string `json:"group"`     // the schedulers' consumer group: the forwarders'
	Schedules int    `json:"schedules"` // in force
	Refused   int    `json:"refused"`   // records kdelay refuses: kdelay schedule list says why
	// Next is the earliest occurrence to come, of any schedule, and NextID
	// the schedule's id; absent when there is none.
	Next   *time.Time `json:"next_occurrence,omitempty"`
	NextID string     `json:"next_id,omitempty"`
	// Overdue are the schedules whose next occurrence to write was due
	// before now (schedule.Listed.Overdue): no kdelay owns their
	// partition, or the one that does is behind.
	Overdue int    `json:"overdue"`
	Members int    `json:"members"`           // of Group, those that read the schedules
	State   string `json:"state"`             // the group's: Stable, Empty, ... or "none"
	Problem string `json:"problem,omitempty"` // why a figure is missing
}

// Schedules reads the recurring schedules from Kafka. A topic or group it
// cannot read is said in Problem, not returned as an error: the levels'
// status stands without it.
func (f *Fleet) Schedules(ctx context.Context, now time.Time) ScheduleStatus {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	// The schedulers read the schedules topic in the forwarders' group
	// (schedule.Config.AsReader): the members that subscribe to it.
	st := ScheduleStatus{Topic: f.cfg.Topics.Schedules(), Group: f.cfg.Group}
	groups, err := f.adm.DescribeGroups(ctx, st.Group)
	if err == nil {
		g, ok := groups[st.Group]
		st.Members = subscribers(g, st.Topic)
		st.State, err = groupState(g, ok)
	}
	if err != nil {
		st.Problem = fmt.Sprintf("describe group %s: %v", st.Group, err)
		return st
	}
	listed, err := f.adm.ListTopics(ctx, st.Topic)
	if err == nil && !listed.Has(st.Topic) {
		st.Problem = fmt.Sprintf("topic %s does not exist: kdelay serve creates it once it is ready", st.Topic)
		return st
	}
	err = f.ScanSchedules(ctx, func(l schedule.Listed) {
		if l.Err != nil {
			st.Refused++
			return
		}
		st.Schedules++
		if l.Overdue(now) {
			st.Overdue++
		}
		// Of two due at once, the first id: the same answer in any order.
		if next := l.Next(now); !next.IsZero() && (st.Next == nil || next.Before(*st.Next) || next.Equal(*st.Next) && l.ID < st.NextID) {
			st.Next, st.NextID = &next, l.ID
		}
	})
	if err != nil {
		return ScheduleStatus{Topic: st.Topic, Group: st.Group, Members: st.Members, State: st.State,
			Problem: fmt.Sprintf("read %s: %v", st.Topic, err)}
	}
	return st
}

// subscribers counts g's members that subscribe to topic.
func subscribers(g kadm.DescribedGroup, topic string) int {
	n := 0
	for _, m := range g.Members {
		if c, ok := m.Join.AsConsumer(); ok && slices.Contains(c.Topics, topic) {
			n++
		}
	}
	return n
}
