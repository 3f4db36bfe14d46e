package forwarder

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commit commits, for every partition whose commit point moved, the lowest
// offset not yet handed on. It runs at most every CommitInterval unless
// forced; mu must be held.
func (w *worker) commit(ctx context.Context, now time.Time, force bool) {
	if !force && now.Sub(w.lastCommit) < w.cfg.CommitInterval {
		return
	}
	w.lastCommit = now
	offsets := map[int32]kgo.EpochOffset{}
	for id, p := range w.parts {
		if pt := p.commitPoint(); pt.Offset > p.committed {
			offsets[id] = pt
		}
	}
	if len(offsets) == 0 {
		return
	}
	w.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{w.source: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				// Cut short by shutdown, which commits again; otherwise the
				// next commit carries the same offsets.
				if !errors.Is(err, context.Canceled) {
					w.log.Warn("commit_failed", "err", err)
				}
				return
			}
			w.log.Debug("committed", "offsets", offsets)
			for _, t := range resp.Topics {
				for _, rp := range t.Partitions {
					p, ok := w.parts[rp.Partition]
					if ok && rp.ErrorCode == 0 {
						p.committed = offsets[rp.Partition].Offset
					}
				}
			}
		})
}
