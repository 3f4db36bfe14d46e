package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// statusTimeout bounds a whole Status once a broker answered: a few admin
// requests, one fetch per partition with records, and the offset lookups of
// the departures.
const statusTimeout = 30 * time.Second

// LevelStatus is what waits in one stage: a line of `kdelay status`, an
// object of its --json, a row of the console's front page.
type LevelStatus struct {
	Level      string `json:"level"` // "ingress", or the level's name
	Topic      string `json:"topic"`
	Group      string `json:"group"`
	Configured bool   `json:"configured"` // false: a dropped level, drained by serve
	Partitions int    `json:"partitions"`
	Pending    int64  `json:"pending"` // records the group has not committed
	// OldestDue is when the earliest head leaves the topic; absent when
	// nothing is pending or no head could be read.
	OldestDue *time.Time `json:"oldest_due,omitempty"`
	// HeadLateness is now minus OldestDue, in seconds: negative while the
	// head waits.
	HeadLateness *float64 `json:"head_lateness_seconds,omitempty"`
	Members      int      `json:"members"`
	State        string   `json:"state"`            // the group's: Stable, Empty, PreparingRebalance, ... or "none"
	Owners       []Owner  `json:"owners,omitempty"` // the group's members and what they were assigned
	// Departures say when what is pending leaves, when asked for.
	Departures *Departures   `json:"departures,omitempty"`
	Problem    string        `json:"problem,omitempty"` // why a figure is missing
	Wait       time.Duration `json:"-"`                 // the stage's delay: 0 for the ingress
}

// Owner is a member of a stage's group: a kdelay process and the partitions
// of the stage's topic its group gave it.
type Owner struct {
	Name       string  `json:"name"` // its instance id, or client id@host without one
	Host       string  `json:"host"`
	Partitions []int32 `json:"partitions"`
}

// Status reads every stage's figures from Kafka: pending records from the
// end and committed offsets, the oldest due time from the record at each
// committed offset, the owners from the groups. With edges, each stage's
// Departures too (see Departures). It reads, and commits or moves nothing.
func (f *Fleet) Status(ctx context.Context, now time.Time, edges []time.Duration) ([]LevelStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	ss, err := f.Stages(ctx)
	if err != nil {
		return nil, err
	}
	offs, err := readOffsets(ctx, f.adm, ss)
	if err != nil {
		return nil, err
	}
	st := make([]LevelStatus, len(ss))
	missing := 0
	for i, s := range ss {
		st[i] = offs.status(s)
		if st[i].Partitions == 0 {
			missing++
		}
	}
	if missing == len(ss) {
		return nil, &NoTopicsError{Prefix: strings.TrimSuffix(f.cfg.Topics.Ingress(), ".ingress"), Brokers: f.cfg.Brokers}
	}
	heads := readHeads(ctx, f.cfg, offs.positions(ss))
	for i, s := range ss {
		heads.apply(&st[i], s, now)
	}
	if edges != nil {
		for i, s := range ss {
			d := f.departures(ctx, offs, s, now, edges)
			st[i].Departures = &d
		}
	}
	return st, nil
}

// NoTopicsError says that none of a fleet's topics exists: a wrong prefix,
// or a fleet never started.
type NoTopicsError struct {
	Prefix  string
	Brokers []string
}

func (e *NoTopicsError) Error() string {
	return fmt.Sprintf("no kdelay topics with prefix %q on %s: check the topic prefix, or start kdelay serve (it creates them)", e.Prefix, strings.Join(e.Brokers, ","))
}

// groupState is the state of a described group, "none" when Kafka knows no
// such group (nothing ever joined it or committed for it).
func groupState(g kadm.DescribedGroup, ok bool) (string, error) {
	switch {
	case !ok, errors.Is(g.Err, kerr.GroupIDNotFound), g.Err == nil && g.State == "Dead":
		return "none", nil
	case g.Err != nil:
		return "", g.Err
	}
	return g.State, nil
}

// owners are g's members with the partitions of topic they were assigned,
// by name.
func owners(g kadm.DescribedGroup, topic string) []Owner {
	var os []Owner
	for _, m := range g.Members {
		o := Owner{Name: m.ClientID + "@" + m.ClientHost, Host: m.ClientHost}
		if m.InstanceID != nil && *m.InstanceID != "" {
			o.Name = *m.InstanceID
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				if t.Topic == topic {
					o.Partitions = append(o.Partitions, t.Partitions...)
				}
			}
		}
		slices.Sort(o.Partitions)
		os = append(os, o)
	}
	slices.SortFunc(os, func(a, b Owner) int { return strings.Compare(a.Name, b.Name) })
	return os
}
