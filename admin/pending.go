package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kdelay/kdelay/forwarder"
)

// pending counts, for each level, the records of its topic its group has not
// committed: the end offset minus the committed one, or minus the start of a
// partition the group never committed (where a forwarder begins reading it),
// as kdelay status does. Three kinds of requests for all levels at once.
func (s *Server) pending(ctx context.Context, levels []forwarder.LevelState) (map[string]int64, error) {
	var topics, groups []string
	for _, l := range levels {
		topics, groups = append(topics, l.Topic), append(groups, l.Group)
	}
	if len(topics) == 0 {
		return nil, nil
	}
	starts, err := s.adm.ListStartOffsets(ctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("pending records: list start offsets: %w", err)
	}
	ends, err := s.adm.ListEndOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("pending records: list end offsets: %w", err)
	}
	commits := s.adm.FetchManyOffsets(ctx, groups...)
	for _, c := range commits {
		// A group that never committed has nothing to fetch.
		if c.Err != nil && !errors.Is(c.Err, kerr.GroupIDNotFound) {
			return nil, fmt.Errorf("pending records: fetch committed offsets of %s: %w", c.Group, c.Err)
		}
	}
	n := map[string]int64{}
	for _, l := range levels {
		committed := commits[l.Group].Fetched
		ends.Each(func(end kadm.ListedOffset) {
			if end.Topic != l.Topic {
				return
			}
			next, _ := starts.Lookup(l.Topic, end.Partition)
			from := next.Offset
			if c, ok := committed.Lookup(l.Topic, end.Partition); ok && c.Err == nil && c.At >= 0 {
				from = max(from, c.At)
			}
			n[l.Level] += max(end.Offset-from, 0)
		})
	}
	return n, nil
}
