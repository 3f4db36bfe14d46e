package forwarder

import (
	"time"
)

// obey applies the command in force for env's id, if any, to e, a record
// about to be routed: a cancel drops it, a reschedule or run-now replaces its
// due time, and a record a scan already moved ahead is dropped as the copy it
// is. It reports whether e is still to be routed.
func (w *worker) obey(e *entry, env *envelope) bool {
	cmd, ok := w.cmds.lookup(env.ID)
	if !ok {
		return true
	}
	if cmd.moved != "" && cmd.moved == source(e.src) {
		w.log.Debug("moved_ahead", "id", env.ID, "source", cmd.moved)
		w.drop(e)
		return false
	}
	if cmd.name == cmdCancel {
		w.applied(env.ID, cmd, "")
		w.log.Debug("cancelled", "id", env.ID, "source", source(e.src))
		w.count(Cancelled)
		w.drop(e)
		return false
	}
	if due := time.UnixMilli(cmd.due); !env.Due.Equal(due) {
		w.applied(env.ID, cmd, "")
		env.Due = due
	}
	return true
}

// drop hands e on as nothing: its offset may be committed.
func (w *worker) drop(e *entry) {
	e.done = true
	w.buf.release(e.size)
	e.letGo()
	e.part.commitPoint()
}

// applied records that this process applied cmd to a record of id and, the
// first time, tells every process with a mark in the control topic. moved is
// the record's source when a scan moved it ahead.
func (w *worker) applied(id string, cmd command, moved string) {
	if w.cmds.matched(id, cmd, moved) {
		w.writeMark(id, cmd, moved)
	}
}

// markMoved writes the mark of a copy moved ahead, now that the broker has
// the copy: from then on whichever process releases the original drops it.
func (w *worker) markMoved(m moveMark) { w.writeMark(m.id, m.cmd, m.source) }

func (w *worker) writeMark(id string, cmd command, moved string) {
	w.noteProduced()
	w.cl.produceFunc(markRecord(w.cfg.Topics.Control(), id, cmd, moved), func(err error) {
		if err != nil {
			// Only this process knows the command matched: another may look
			// for the record in vain, or report the command unmatched.
			w.log.Warn("command_mark_failed", "id", id, "err", err)
		}
	})
}

// obeyHeld reports whether e, a record held in memory and due to be
// produced, is still to be produced as it is: false when a command changed
// it, and then it must be routed again from its source record (obey drops it
// or gives it its new due time, and it goes where that leads).
func (w *worker) obeyHeld(e *entry) bool {
	if e.dead || e.id == "" || e.src == nil {
		return true
	}
	cmd, ok := w.cmds.lookup(e.id)
	if !ok || !w.changes(e, cmd) {
		return true
	}
	e.out, e.at, e.attempts, e.first = nil, time.Time{}, 0, time.Time{}
	return false
}

// changes reports whether cmd changes what happens to e, a held record.
func (w *worker) changes(e *entry, cmd command) bool {
	return cmd.name == cmdCancel || cmd.moved == source(e.src) || !e.due.Equal(time.UnixMilli(cmd.due))
}

// recheckHeld makes held records that a command changed due now, so that
// releaseHeld applies it at once: a cancel or an earlier time must not wait
// for the old one. mu must be held.
func (w *worker) recheckHeld(now time.Time) {
	if v := w.cmds.versionNow(); v == w.cmdVersion {
		return
	} else {
		w.cmdVersion = v
	}
	changed := false
	for e := range w.held.all() {
		if e.dead || e.id == "" || e.src == nil {
			continue
		}
		if cmd, ok := w.cmds.lookup(e.id); ok && w.changes(e, cmd) {
			e.at, changed = now, true
		}
	}
	if changed {
		w.held.reorder() // rare: a command in force changed a held record
	}
}
