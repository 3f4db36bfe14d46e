package schedule

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Compacting the schedules topic where the broker does not (Config.Compact):
// kdelay's embedded broker, kfake, which kdelay runs without its cleaner.
// Without it the topic keeps every progress record for ever, one per
// occurrence written (86,400 a day for an @every 1s schedule), and a
// process reads them all each time it is assigned a partition.
//
// Kafka's protocol deletes only a partition's oldest records
// (DeleteRecords), and the oldest are the ones that stay in force: a
// schedule written once and never replaced. So the owner of a partition
// first writes a snapshot of each of its schedules at the partition's end:
// the schedule's progress, in its progress record, with a copy of the
// schedule record in force (its value, timestamp and headers, and the
// offset it had: a schedule's version, which its count is for). Once every
// snapshot is written (acknowledged; committed, in exactly-once), every
// record before the offset the partition was read to when the snapshots
// began is superseded, and goes.
//
// Why the owner, and not the broker's retention pass: only the owner knows
// what is in force, and it writes the partition's progress under the
// group's fencing (its transaction commits only while it owns the
// partition). Why this holds a schedule's guarantees:
//   - Records are deleted only before the cut, every one of which the owner
//     had read when it began the snapshots, and only after the snapshots are
//     written: a process reading the partition from its start then meets
//     each schedule's snapshot, and applies the progress it carries as it
//     applies any (it only moves forward). So a restart neither skips an
//     occurrence nor writes one twice, in exactly-once neither.
//   - A schedule record written after the cut (a replace, a delete) stays,
//     and wins over a snapshot written after it, whose copy is older: a copy
//     is applied only if the offset it had is newer than the schedule's
//     record in force (state.applySnapshot). So a snapshot racing a user's
//     write cannot bring an old schedule back.
//   - A deleted schedule keeps the offset of its tombstone in its snapshot,
//     so a late snapshot of a process that lost the partition (at-least-once)
//     cannot bring it back either. A deleted schedule that never wrote an
//     occurrence costs a snapshot too: the partition keeps one record per id
//     ever used, as the process keeps one slot in memory (index.go).
//   - A record kdelay refused (invalid, or in the wrong partition) is kept
//     as a deletion: it was never in force.
//
// What the topic then holds, per partition: its schedules' snapshots, and
// what was written since, less than twice as many records as it has
// schedules plus compactAfter; each compaction writes one record per
// schedule after at least as many new ones, so it at most doubles the
// writes.
const compactAfter = 1000

// compaction is one under way: the snapshots are written over as many
// steps as Batch takes, slot by slot. The slots added since it began have
// their records after the cut.
type compaction struct {
	cut  int64 // the partition is read to here: every record before it is superseded once the snapshots are written
	from int32 // the first slot whose snapshot is not written yet
	to   int32 // the slots it snapshots end here
}

// compact adds to the plans, through get, the slots of the partitions with
// enough superseded records to snapshot next, at most max of them, and the
// cut of each partition whose snapshots then are all planned.
func (s *state) compact(max int, get func(*part) *plan) {
	if !s.cfg.Compact {
		return
	}
	taken := 0
	for _, id := range slices.Sorted(maps.Keys(s.parts)) {
		p := s.parts[id]
		if !p.loaded {
			continue
		}
		if p.compaction == nil {
			if p.next-p.base < 2*int64(p.x.len())+compactAfter {
				continue
			}
			p.compaction = &compaction{cut: p.next, to: int32(p.x.len())}
		}
		c := p.compaction
		for ; c.from < c.to && taken < max; c.from++ {
			get(p).snap = append(get(p).snap, c.from)
			taken++
		}
		if c.from == c.to {
			get(p).cut = true
		}
	}
}

// snapped is a slot whose snapshot a batch writes: once written, the
// snapshot is where the slot is read back from.
type snapped struct {
	p *part
	i int32
	r *kgo.Record
}

// snapshots adds to b the snapshots pl planned, and its cut.
func (s *state) snapshots(pl *plan, b *batch) {
	for _, i := range pl.snap {
		e, ok := s.entry(pl, i)
		if !ok {
			continue
		}
		r := s.snapshot(e)
		b.progress = append(b.progress, r)
		b.snapped = append(b.snapped, snapped{pl.p, i, r})
		b.parts[pl.p.id] = true
		b.snapshots++
	}
	if pl.cut {
		b.cuts[pl.p.id] = pl.p.compaction.cut
		pl.p.compaction = nil
	}
}

// moved points each slot snapshotted by b at its snapshot, now written
// (its offset set). A slot reloaded since is not b's.
func (s *state) moved(b batch) {
	for _, sn := range b.snapped {
		if s.parts[sn.p.id] == sn.p {
			sn.p.x.slot(sn.i).at = sn.r.Offset
		}
	}
}

// snapshot is e's progress record, with a copy of the schedule record in
// force. Its headers are the copy's first, then kdelay's own
// (splitHeaders), and its timestamp is the copy's: the schedule's start.
func (s *state) snapshot(e *entry) *kgo.Record {
	r := progressRecord(s.cfg.Topics.Schedules(), e.part, e.id, e.done)
	version := strconv.AppendInt(nil, e.version, 10)
	switch {
	case e.version < 0: // no schedule record read: the progress alone
	case e.live:
		copied := make([]kgo.RecordHeader, 0, len(e.headers)+6+len(r.Headers)+1)
		copied = append(copied, e.headers...)
		for _, h := range e.sched.Fields().Headers() {
			copied = append(copied, kgo.RecordHeader(h))
		}
		r.Headers = append(append(copied, r.Headers...), kgo.RecordHeader{Key: headerSchedule, Value: version})
		r.Value, r.Timestamp = e.value, e.sched.Start
	default:
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headerDeleted, Value: version})
	}
	return r
}

// trim deletes the records before each partition's cut, once the snapshots
// that supersede them are written. A partition it fails to trim is tried
// again after as many records more.
func (s *Scheduler) trim(ctx context.Context, cuts map[int32]int64) {
	if len(cuts) == 0 {
		return
	}
	topic := s.cfg.Topics.Schedules()
	offsets := kadm.Offsets{}
	for p, at := range cuts {
		offsets.AddOffset(topic, p, at, -1)
	}
	resps, err := s.adm.DeleteRecords(ctx, offsets)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(cuts)) {
		p, ok := s.st.parts[id]
		if !ok {
			continue // revoked: its next owner compacts it
		}
		perr := err
		if r, ok := resps.Lookup(topic, id); perr == nil && ok {
			perr = r.Err
		}
		// Out of range: the partition starts past the cut already.
		if perr != nil && !errors.Is(perr, kerr.OffsetOutOfRange) {
			p.base = p.next
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("schedules_compact_failed", "partition", id, "err", perr)
			}
			continue
		}
		s.cfg.Logger.Info("schedules_compacted", "partition", id, "records_deleted", cuts[id]-p.base, "schedules", p.x.len())
		p.base = max(p.base, cuts[id])
	}
}
