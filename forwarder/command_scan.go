package forwarder

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// A reschedule to an earlier time, or a run-now, may find its record in a
// level that releases it only after the new due time: a record in the 2h
// level, rescheduled to a minute from now. Commands are consulted when a
// record leaves its level (command_obey.go), and that would be too late. So when such
// a command falls due without having matched, every level forwarder that
// could hide the record looks for it among what it has not released yet —
// its buffered records, then the rest of its partitions in Kafka, from the
// first record written late enough to be released after the due time — and
// delivers a copy at once. The original is dropped when it leaves its level,
// by whichever process then owns it, since the mark names its source. A hop
// on its way to the level while the level scanned (routed before the command
// was known, taken by the broker after the scan listed the level's end) is
// moved ahead by the router that wrote it, once the broker has it
// (hopLanded).
//
// Nothing is indexed per record: a scan reads what is pending in the levels
// that could hide the record, and only for commands that fall due unmatched.
// A reschedule to a later time never needs one: the record leaves its level
// by its old due time, before the new one, and is re-planned then.

// scanTimeout bounds a scan: a record not found within it is delivered when
// it leaves its level, late, never lost.
const scanTimeout = 30 * time.Second

// found is a record a scan found hidden: due by cmd, released after it.
type found struct {
	rec *kgo.Record
	id  string
	cmd command
}

// moveMark is what a copy moved ahead must mark once the broker has it.
type moveMark struct {
	id, source string
	cmd        command
}

// scanState is a worker's scans: at most one in flight. Guarded by
// worker.mu but wg, which the scan's goroutine ends.
type scanState struct {
	from    int            // the next of the commands' ready list to look for
	running bool           // a scan is in flight
	side    *partition     // the partition of copies moved ahead by a scan: never committed
	wg      sync.WaitGroup // the scan in flight
}

// scanPart is one partition to scan: its buffered records, and Kafka from
// the offset after them, or from the group's committed offset if from is -1.
type scanPart struct {
	id    int32
	queue []*kgo.Record
	from  int64
}

// lookForHidden starts a scan if commands fell due unmatched that this level
// could hide the record of. mu must be held.
func (w *worker) lookForHidden() {
	if w.wait == 0 || w.cmds == nil || w.scans.running || w.runCtx == nil {
		return
	}
	ready, next := w.cmds.readySince(w.scans.from)
	want := map[string]command{}
	var earliestDue int64
	for _, p := range ready {
		cur, ok := w.cmds.lookup(p.id)
		if !ok || cur.part != p.cmd.part || cur.off != p.cmd.off || cur.matched {
			continue
		}
		// A record this level held when the command was written is
		// released by at + wait; if that is no later than the new due
		// time, the record is re-planned when it leaves.
		if time.Duration(cur.due-cur.at)*time.Millisecond >= w.wait {
			continue
		}
		want[p.id] = cur
		if earliestDue == 0 || cur.due < earliestDue {
			earliestDue = cur.due
		}
	}
	if len(want) == 0 {
		w.scans.from = next
		return
	}
	var parts []scanPart
	for _, id := range w.owners.of(w.source) {
		// A partition fetched from is scanned in its buffered records and
		// in Kafka after them; one not fetched from yet (just assigned, its
		// records in a transaction still open, or the buffer full) in Kafka
		// from the group's committed offset.
		sp := scanPart{id: id, from: -1}
		if p, ok := w.parts[id]; ok && !p.gone {
			sp.queue, sp.from = append([]*kgo.Record(nil), p.queue...), p.next.Offset
			if n := len(p.queue); n > 0 {
				sp.from = p.queue[n-1].Offset + 1
			}
		}
		parts = append(parts, sp)
	}
	if len(parts) == 0 {
		// Not assigned yet, or no longer: look again once the group has
		// given this level partitions, rather than leave the commands to
		// the old due time.
		return
	}
	w.scans.from = next
	w.scans.running = true
	w.log.Debug("scan_started", "commands", len(want), "partitions", len(parts))
	w.scans.wg.Go(func() {
		// Released after the due time means written after due - wait.
		fs := w.scan(w.runCtx, want, parts, time.UnixMilli(earliestDue).Add(-w.wait))
		w.inbox.putFound(fs)
		w.wake()
	})
}

// scan returns the records of parts that want's commands name and that the
// level would release after their new due time.
func (w *worker) scan(ctx context.Context, want map[string]command, parts []scanPart, after time.Time) []found {
	var fs []found
	for _, p := range parts {
		for _, r := range p.queue {
			if f, ok := w.hidden(r, want); ok {
				fs = append(fs, f)
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, scanTimeout)
	defer cancel()
	tail, err := w.scanKafka(ctx, want, parts, after)
	if err != nil {
		w.log.Warn("scan_incomplete", "commands", len(want), "err", err,
			"effect", "a record not found is delivered when it leaves its level, late")
	}
	w.log.Debug("scanned", "commands", len(want), "found", len(fs)+len(tail))
	return append(fs, tail...)
}

// scanKafka reads each partition from its scanPart's offset, or the first
// record written after after if that comes later, to its end.
func (w *worker) scanKafka(ctx context.Context, want map[string]command, parts []scanPart, after time.Time) ([]found, error) {
	// The worker's own client answers the offset requests; reading needs
	// a client of its own, since the worker's consumes as a group member.
	adm := w.cl.admin()
	// The end, not the last stable offset: a record hopped here in a
	// transaction not yet committed (exactly-once commits every
	// CommitInterval) may be the one wanted, and it is readable once the
	// transaction commits. One a dead process left open holds the scan
	// until scanTimeout.
	ends, err := adm.ListEndOffsets(ctx, w.source)
	if err != nil {
		return nil, err
	}
	starts, err := adm.ListOffsetsAfterMilli(ctx, after.UnixMilli(), w.source)
	if err != nil {
		return nil, err
	}
	var committed kadm.OffsetResponses
	if slices.ContainsFunc(parts, func(p scanPart) bool { return p.from < 0 }) {
		if committed, err = adm.FetchOffsets(ctx, w.group); err == nil {
			err = committed.Error()
		}
		if err != nil {
			return nil, err
		}
	}
	offsets, remaining := map[int32]kgo.Offset{}, map[int32]int64{}
	for _, p := range parts {
		from := p.from
		if from < 0 {
			from = 0
			if c, ok := committed.Lookup(w.source, p.id); ok && c.At > 0 {
				from = c.At
			}
		}
		if s, ok := starts.Lookup(w.source, p.id); ok && s.Err == nil && s.Offset > from {
			from = s.Offset
		}
		if e, ok := ends.Lookup(w.source, p.id); ok && e.Err == nil && e.Offset > from {
			offsets[p.id] = kgo.NewOffset().At(from)
			remaining[p.id] = e.Offset
		}
	}
	if len(offsets) == 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(w.cfg.Brokers...),
		kgo.ClientID("kdelay-scan"),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.source: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// A partition written in transactions (exactly-once) may end with
		// a transaction marker: without it the scan would not see its end.
		kgo.KeepControlRecords(),
		kgo.DisableClientMetrics(),
	}, w.cfg.ClientOpts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var fs []found
	for len(remaining) > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fs, err
		}
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := remaining[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			if f, ok := w.hidden(r, want); ok && !r.Attrs.IsControl() {
				fs = append(fs, f)
			}
			if r.Offset+1 >= end {
				delete(remaining, r.Partition)
			}
		})
	}
	return fs, nil
}

// hidden reports whether r is a record one of want's commands names, not yet
// re-planned to its due time, that this level releases after that time.
func (w *worker) hidden(r *kgo.Record, want map[string]command) (found, bool) {
	var id string
	for _, h := range r.Headers {
		if h.Key == kdelay.HeaderID {
			id = string(h.Value)
		}
	}
	cmd, ok := want[id]
	if !ok {
		return found{}, false
	}
	env, err := parse(r, w.rules)
	if err != nil || env.Due.UnixMilli() == cmd.due || !r.Timestamp.Add(w.wait).After(time.UnixMilli(cmd.due)) {
		return found{}, false
	}
	return found{rec: r, id: id, cmd: cmd}, true
}

// moveAhead delivers a copy of each record a scan found that is still
// pending here, and marks the original moved so that it is dropped when it
// leaves its level. mu must be held.
func (w *worker) moveAhead(now time.Time) {
	fs, done := w.inbox.takeFound()
	if done {
		w.scans.running = false
	}
	for _, f := range fs {
		if p, ok := w.parts[f.rec.Partition]; ok && (p.gone || p.leaving || f.rec.Offset < p.next.Offset) {
			continue // released and re-planned already
		}
		if !w.owners.owns(w.source, f.rec.Partition) {
			continue // moved to another member
		}
		w.moveCopy(f.rec, f.id, f.cmd)
	}
}

// moveCopy delivers a copy of rec, a record of id pending in a level that
// releases it after cmd's due time, and marks the original moved so that it
// is dropped when it leaves its level. mu must be held.
func (w *worker) moveCopy(rec *kgo.Record, id string, cmd command) {
	cur, ok := w.cmds.lookup(id)
	src := source(rec)
	if !ok || cur.part != cmd.part || cur.off != cmd.off || cur.moved == src {
		return // another command since, or moved already
	}
	env, err := parse(rec, w.rules)
	if err != nil {
		return // dead-lettered when it leaves its level
	}
	env.Due = time.UnixMilli(cur.due)
	// Moved now, so that the original, if released before the copy is
	// acknowledged, is dropped: the copy is retried like any delivery,
	// and dead-lettered with the reason if it cannot be made.
	if !w.cmds.matched(id, cur, src) {
		return // the level's scan and the hop's router both found it: the other moved it
	}
	e := &entry{part: w.scans.side, src: rec, id: id, due: env.Due, mark: &moveMark{id: id, source: src, cmd: cur}}
	e.out = env.delivery(e.next())
	w.log.Debug("moving_ahead", "id", id, "source", src, "due", env.Due)
	w.produce(e)
	if w.txn != nil {
		w.tx.moves = append(w.tx.moves, *e.mark)
	}
}

// hopLanded runs when the broker has taken e, a hop to a level. A run-now or
// earlier reschedule that fell due while the hop was on its way was looked
// for in that level (lookForHidden) maybe before the broker had the hop: the
// scan reads a partition up to the end it lists first. The router learns the
// hop's place now, so it moves the hop ahead itself. A command not due yet is
// left to the level's scan, which comes after this. Only a hop to a level
// partition this process owns: then the scan that may find it too consults
// the same command table, so one of the two moves it. mu must be held.
func (w *worker) hopLanded(e *entry, now time.Time) {
	cmd, ok := w.cmds.lookup(e.id)
	if !ok || cmd.name == cmdCancel || cmd.matched || cmd.due > now.UnixMilli() {
		return
	}
	wait, ok := w.cfg.levelWait(e.out.Topic)
	if !ok || !e.out.Timestamp.Add(wait).After(time.UnixMilli(cmd.due)) {
		return // released by the new due time: re-planned then
	}
	if !w.owners.owns(e.out.Topic, e.out.Partition) {
		// Another process's level may have found it too, and its
		// command table is not this one: left to it (docs/CANCEL.md).
		return
	}
	w.moveCopy(e.out, e.id, cmd)
}
