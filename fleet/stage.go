package fleet

import (
	"context"
	"fmt"

	"github.com/kdelay/kdelay/stages"
)

// Stage is one forwarder of a kdelay fleet as Kafka shows it: the topic it
// reads, the consumer group it reads it with and how long a record waits
// there. Package stages names them, for the forwarder and the pending gauge
// too.
type Stage = stages.Stage

func (c Config) view() stages.Config {
	return stages.Config{Topics: c.Topics, Group: c.Group, Levels: c.Levels}
}

// Stages are the ingress and the configured levels, then the level topics of
// the prefix that no configured level names, shortest delay first: serve
// drains those that hold records, and leaves the topics for the user to
// delete.
func (f *Fleet) Stages(ctx context.Context) ([]Stage, error) {
	topics, err := f.adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	view := f.cfg.view()
	dropped, _ := view.Dropped(topics.Names()) // a topic that is not a level: serve warns of it
	return append(view.Configured(), dropped...), nil
}
