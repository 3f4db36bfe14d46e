package admin

import (
	"context"
	"fmt"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/stages"
)

// pending counts, for each level this process forwards, the records of its
// topic its group has not committed, as kdelay status counts them (package
// stages holds the rule). Three kinds of requests for all levels at once. A
// level whose count misses a figure fails the whole gauge, so that an alert
// on pending sees the series go rather than a count too low.
func (s *Server) pending(ctx context.Context, levels []forwarder.LevelState) (map[string]int64, error) {
	if len(levels) == 0 {
		return nil, nil
	}
	ss := make([]stages.Stage, len(levels))
	for i, l := range levels {
		ss[i] = stages.Stage{Name: l.Level, Topic: l.Topic, Group: l.Group}
	}
	offs, err := stages.ReadOffsets(ctx, s.adm, ss)
	if err != nil {
		return nil, fmt.Errorf("pending records: %w", err)
	}
	n := map[string]int64{}
	for _, st := range ss {
		if n[st.Name], err = offs.Pending(st); err != nil {
			return nil, fmt.Errorf("pending records of level %s: %w", st.Name, err)
		}
	}
	return n, nil
}
