package fleet

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// Stage is one forwarder of a kdelay fleet as Kafka shows it: the topic it
// reads, the consumer group it reads it with and how long a record waits
// there. The group names are forwarder.Config.Group's: "<group>.ingress" and
// "<group>.level.<name>".
type Stage struct {
	Name, Topic, Group string
	Wait               time.Duration // 0 for the ingress, which forwards on arrival
	Configured         bool          // false for a dropped level serve drains
}

func (c Config) stages() []Stage {
	ss := []Stage{{Name: forwarder.IngressLevel, Topic: c.Topics.Ingress(), Group: forwarder.IngressGroup(c.Group), Configured: true}}
	for _, l := range c.Levels {
		ss = append(ss, c.levelStage(l, true))
	}
	return ss
}

func (c Config) levelStage(l levels.Level, configured bool) Stage {
	return Stage{Name: l.Name, Topic: c.Topics.Level(l.Name), Group: forwarder.LevelGroup(c.Group, l.Name), Wait: l.Delay, Configured: configured}
}

// Stages are the ingress and the configured levels, then the level topics of
// the prefix that no configured level names: serve drains them, and until it
// has they hold records.
func (f *Fleet) Stages(ctx context.Context) ([]Stage, error) {
	ss := f.cfg.stages()
	topics, err := f.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var dropped []Stage
	known := map[string]bool{}
	for _, s := range ss {
		known[s.Topic] = true
	}
	for _, topic := range topics.Names() {
		name, ok := strings.CutPrefix(topic, f.cfg.Topics.Level(""))
		if !ok || known[topic] {
			continue
		}
		if set, err := levels.Parse([]string{name}); err == nil {
			dropped = append(dropped, f.cfg.levelStage(set[0], false))
		}
	}
	slices.SortFunc(dropped, func(a, b Stage) int { return cmp.Compare(a.Wait, b.Wait) })
	return append(ss, dropped...), nil
}
