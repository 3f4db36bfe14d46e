// Package stages is the Kafka-side view of a kdelay fleet, kept in one place:
// its stages (the ingress, each configured level, and each dropped level whose
// topic is left), the consumer group each stage is read with, and how many
// records each group has not committed. The forwarder decides with it whether
// a dropped level is drained, package admin reports kdelay_pending_records
// with it, and package fleet shows it in kdelay status and the console, so
// the numbers an operator reads agree.
//
//	ss := stages.Config{Group: "kdelay", Levels: set}.Configured()
//	offs, _ := stages.ReadOffsets(ctx, adm, ss)
//	n, err := offs.Pending(ss[0])
package stages

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/levels"
)

// Ingress is the name of the ingress stage, where a level has its own: no
// delay level can be called that, since level names are durations.
const Ingress = "ingress"

// IngressGroup is the consumer group the ingress was read with in the
// per-stage layout: "<group>.ingress" (LegacyGroups).
func IngressGroup(group string) string { return group + ".ingress" }

// LevelGroup is the consumer group the level with the given name was read
// with in the per-stage layout: "<group>.level.<name>".
func LevelGroup(group, level string) string { return group + ".level." + level }

// LegacyGroups are the consumer groups of the per-stage layout, where each
// stage has its own: the ingress's, each configured level's, then each
// dropped level's (as Dropped returns them). A process of the one-group
// layout takes their committed offsets over once, and says how to delete
// them. They are named by IngressGroup and LevelGroup.
func (c Config) LegacyGroups(dropped []Stage) []string {
	groups := []string{IngressGroup(c.Group)}
	for _, l := range c.Levels {
		groups = append(groups, LevelGroup(c.Group, l.Name))
	}
	for _, s := range dropped {
		groups = append(groups, LevelGroup(c.Group, s.Name))
	}
	return groups
}

// Stage is one forwarder of a fleet as Kafka shows it: the topic it reads,
// the consumer group it reads it with and how long a record waits there.
type Stage struct {
	Name       string        // Ingress, or the level's name
	Topic      string        // the topic it forwards from
	Group      string        // the whole group name: Config.Group
	Wait       time.Duration // the level's delay; 0 for the ingress, which forwards on arrival
	Configured bool          // false for a dropped level, which serve drains
}

// Config names a fleet's stages: the settings its kdelay serve runs with.
type Config struct {
	Topics kdelay.Topics // the topic prefix serve runs with; kdelay.DefaultPrefix when empty
	Group  string        // the consumer group serve runs with, in either delivery; no default here (serve's is forwarder.DefaultGroup)
	Levels levels.Set    // the levels serve runs with; none configured when empty
}

// Groups are the consumer groups of stages, each once.
func Groups(stages []Stage) []string {
	var groups []string
	for _, s := range stages {
		if !slices.Contains(groups, s.Group) {
			groups = append(groups, s.Group)
		}
	}
	return groups
}

// Configured are the ingress, then each configured level in order.
func (c Config) Configured() []Stage {
	ss := []Stage{{Name: Ingress, Topic: c.Topics.Ingress(), Group: c.Group, Configured: true}}
	for _, l := range c.Levels {
		ss = append(ss, c.level(l, true))
	}
	return ss
}

func (c Config) level(l levels.Level, configured bool) Stage {
	return Stage{Name: l.Name, Topic: c.Topics.Level(l.Name), Group: c.Group, Wait: l.Delay, Configured: configured}
}

// NotLevel is a topic named like a level topic of the prefix whose name is
// not a level: nothing forwards from it.
type NotLevel struct {
	Topic string
	Err   error // why its name is not a level
}

// Dropped picks, from the names of the topics a cluster has, the level
// topics of the prefix that no configured level names, shortest delay
// first: records may still wait in them, planned into the level before it
// was dropped, and serve drains them. Topics of the level prefix whose
// name is not a level are returned apart.
func (c Config) Dropped(topics []string) ([]Stage, []NotLevel) {
	configured := map[string]bool{}
	for _, s := range c.Configured() {
		configured[s.Topic] = true
	}
	var dropped []Stage
	var not []NotLevel
	for _, topic := range topics {
		name, ok := strings.CutPrefix(topic, c.Topics.Level(""))
		if !ok || configured[topic] {
			continue
		}
		set, err := levels.Parse([]string{name})
		if err != nil {
			not = append(not, NotLevel{Topic: topic, Err: err})
			continue
		}
		dropped = append(dropped, c.level(set[0], false))
	}
	slices.SortStableFunc(dropped, func(a, b Stage) int { return cmp.Compare(a.Wait, b.Wait) })
	return dropped, not
}
