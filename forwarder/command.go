package forwarder

import (
	"container/heap"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kdelay/kdelay"
)

// commands is the command in force for each message id, as the control topic
// says: every forwarder of a process consults it for each record it routes or
// releases (command_obey.go). It holds one entry per id with a live command, never
// one per pending record, and forgets a command ttl after it was written:
// every record pending then has left its level within the largest level, and
// the rest of ttl (RetentionHeadroom) covers kdelay being stopped or behind.
//
// Its reader (command_control.go) is the only writer; forwarders read it under the
// read lock, and skip even that while there is no command at all.
type commands struct {
	ttl time.Duration
	log *slog.Logger

	n       atomic.Int64  // len(byID), read without the lock
	version atomic.Uint64 // bumped when a command is set or made ready: held records are looked at again

	mu      sync.RWMutex
	byID    map[string]live   // the command in force, by id; see get and put
	moved   map[string]string // the moved of the few commands that have one, by id
	marks   map[string]mark   // marks read before their command, by id
	waiting dueHeap           // reschedules and run-nows, by due time, until due
	ready   []pendingScan     // commands due and not matched: hidden records to find (command_scan.go)
	base    int               // how many were dropped from the front of ready

	stats CommandStats
}

// command is one live command, as the table hands it out.
type command struct {
	name    byte  // cmdCancel, cmdReschedule or cmdRunNow
	matched bool  // a forwarder applied it to a record: this process, or another's mark
	part    int32 // where the command is in the control topic: a mark names it
	off     int64
	due     int64  // unix milliseconds: the new due time of a reschedule or run-now
	at      int64  // unix milliseconds: the command record's timestamp
	moved   string // source of the record a scan moved ahead, if one did
}

// live is a command as the table keeps it: 32 bytes beside its id, and a
// map slot of 48, so that a million live commands cost about 100 MB
// (docs/BENCHMARKS.md; TestCommandsMemory holds it). moved, a string of 16
// bytes that only a command whose record a scan moved ahead has, lives in
// a map of its own.
type live struct {
	off   int64
	due   int64
	at    int64
	part  int32
	name  byte
	flags byte // liveMatched, liveMoved
}

const (
	liveMatched byte = 1 << iota
	liveMoved
)

// get returns id's command. mu must be held.
func (c *commands) get(id string) (command, bool) {
	l, ok := c.byID[id]
	if !ok {
		return command{}, false
	}
	cmd := command{name: l.name, matched: l.flags&liveMatched != 0, part: l.part, off: l.off, due: l.due, at: l.at}
	if l.flags&liveMoved != 0 {
		cmd.moved = c.moved[id]
	}
	return cmd, true
}

// put makes cmd id's command. mu must be held for writing.
func (c *commands) put(id string, cmd command) {
	l := live{off: cmd.off, due: cmd.due, at: cmd.at, part: cmd.part, name: cmd.name}
	if cmd.matched {
		l.flags |= liveMatched
	}
	if cmd.moved != "" {
		l.flags |= liveMoved
		c.moved[id] = cmd.moved
	} else if old, ok := c.byID[id]; ok && old.flags&liveMoved != 0 {
		delete(c.moved, id)
	}
	c.byID[id] = l
}

// forget drops id's command. mu must be held for writing.
func (c *commands) forget(id string) {
	if l, ok := c.byID[id]; ok && l.flags&liveMoved != 0 {
		delete(c.moved, id)
	}
	delete(c.byID, id)
}

const (
	cmdCancel byte = iota + 1
	cmdReschedule
	cmdRunNow
)

var cmdNames = map[string]byte{kdelay.CommandCancel: cmdCancel, kdelay.CommandReschedule: cmdReschedule, kdelay.CommandRunNow: cmdRunNow}

// mark is what a forwarder writes to the control topic when it applies a
// command, so every process knows it matched (and does not look for the
// record, nor report the command unmatched), and so that a record moved
// ahead by a scan is skipped when it surfaces, even by another process.
type mark struct {
	part  int32
	off   int64
	moved string // the record's source, topic/partition/offset, if a scan moved it ahead
}

// CommandStats counts what this process's command reader saw.
type CommandStats struct {
	Live      int64 // commands in force now
	Read      int64 // commands read from the control topic
	Invalid   int64 // command records refused, each logged with its reason
	Matched   int64 // commands a forwarder of this process applied to a record
	Unmatched int64 // commands forgotten without matching a record, each logged (this process reports them only if it owns ingress partition 0)
	Cancelled int64 // records not delivered because of a cancel
}

func newCommands(ttl time.Duration, log *slog.Logger) *commands {
	return &commands{ttl: ttl, log: log, byID: map[string]live{}, moved: map[string]string{}, marks: map[string]mark{}}
}

// lookup returns the command in force for id. It is called for every record:
// with no command at all it takes no lock.
func (c *commands) lookup(id string) (command, bool) {
	if c == nil || c.n.Load() == 0 {
		return command{}, false
	}
	c.mu.RLock()
	cmd, ok := c.get(id)
	c.mu.RUnlock()
	return cmd, ok
}

// set makes cmd the command in force for id, as the record at part/off said.
func (c *commands) set(id string, cmd command) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stats.Read++
	if m, ok := c.marks[id]; ok && m.part == cmd.part && m.off == cmd.off {
		cmd.matched, cmd.moved = true, m.moved
		delete(c.marks, id)
	}
	c.put(id, cmd)
	c.n.Store(int64(len(c.byID)))
	c.version.Add(1)
	if cmd.name != cmdCancel && !cmd.matched {
		heap.Push(&c.waiting, waitingScan{due: cmd.due, id: id, part: cmd.part, off: cmd.off})
	}
}

// clear forgets id's command: a tombstone, or a record that is not a valid
// command, which compaction would keep in its place.
func (c *commands) clear(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(id)
	c.n.Store(int64(len(c.byID)))
}

// mark records that id's command at m.part/m.off was applied.
func (c *commands) mark(id string, m mark) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmd, ok := c.get(id)
	switch {
	case ok && cmd.part == m.part && cmd.off == m.off:
		cmd.matched = true
		if m.moved != "" {
			cmd.moved = m.moved
		}
		c.put(id, cmd)
	case !ok || cmd.off < m.off || cmd.part != m.part:
		// Read before its command (another partition of the control
		// topic), or for a command already superseded: keep it until
		// the command comes, and let expiry drop it otherwise.
		c.marks[id] = m
	}
}

// matched records that this process applied id's command cmd, and reports
// whether it is the first time, when a mark is due. With moved, the first
// time for that record: the router that wrote a hop and the level that
// scanned for it may both find it, and only one must move it (command_scan.go).
func (c *commands) matched(id string, cmd command, moved string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, ok := c.get(id)
	if !ok || cur.part != cmd.part || cur.off != cmd.off || (cur.matched && (moved == "" || cur.moved == moved)) {
		return false
	}
	cur.matched = true
	if moved != "" {
		cur.moved = moved
	}
	c.put(id, cur)
	c.stats.Matched++
	return true
}

// sweepChunk is how many entries expire looks at per hold of the lock.
// Going over a million takes tens of milliseconds, which forwarders would
// spend waiting for the lock to look up a record's id: in chunks each of
// them waits a fraction of a millisecond at most.
const sweepChunk = 4096

// expire forgets every command written more than ttl before now and returns
// the ids of those that matched no record. It lets go of the lock between
// chunks: the ranges over the maps go on where they were, which Go allows
// of a map changed meanwhile, and only forwarders change it then, each an
// entry that exists (matched, unmove): only this reader adds or deletes.
func (c *commands) expire(now time.Time) (unmatched []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := now.Add(-c.ttl).UnixMilli()
	seen := 0
	for id, l := range c.byID {
		if l.at < before {
			if l.flags&liveMatched == 0 {
				unmatched = append(unmatched, id)
			}
			c.forget(id)
		}
		if seen++; seen%sweepChunk == 0 {
			c.n.Store(int64(len(c.byID)))
			c.mu.Unlock()
			c.mu.Lock()
		}
	}
	for id := range c.marks {
		if _, ok := c.byID[id]; !ok {
			delete(c.marks, id)
		}
	}
	c.n.Store(int64(len(c.byID)))
	return unmatched
}

// Stats returns what the reader saw so far.
func (c *commands) Stats() CommandStats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s := c.stats
	s.Live = int64(len(c.byID))
	return s
}

func (c *commands) count(f func(*CommandStats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// waitingScan is a reschedule or run-now that has not matched a record yet,
// waiting for its due time: if it still has not matched then, the record may
// be in a level that releases it after that time, and forwarders look for it
// (command_scan.go).
type waitingScan struct {
	due  int64
	id   string
	part int32
	off  int64
}

type dueHeap []waitingScan

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due < h[j].due }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(waitingScan)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// pendingScan is a command due and not matched: its record, if pending, is
// hidden in a level that releases it too late.
type pendingScan struct {
	id  string
	cmd command
}

// promote moves the commands due by now and still unmatched to ready, and
// returns when the next one is due (zero if none) and whether ready grew.
func (c *commands) promote(now time.Time) (next time.Time, grew bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms := now.UnixMilli()
	for c.waiting.Len() > 0 && c.waiting[0].due <= ms {
		w := heap.Pop(&c.waiting).(waitingScan)
		cmd, ok := c.get(w.id)
		if ok && cmd.part == w.part && cmd.off == w.off && !cmd.matched {
			c.ready = append(c.ready, pendingScan{id: w.id, cmd: cmd})
			grew = true
		}
	}
	if grew {
		c.version.Add(1)
	}
	if c.waiting.Len() > 0 {
		next = time.UnixMilli(c.waiting[0].due)
	}
	return next, grew
}

// readySince returns the commands made ready since index from (an index
// readySince returned before; 0 at first) and the index to ask from next.
func (c *commands) readySince(from int) ([]pendingScan, int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	end := c.base + len(c.ready)
	if from >= end {
		return nil, end
	}
	from = max(from, c.base)
	return c.ready[from-c.base:], end
}

// prune drops what expire left behind: ready commands older than ttl, and
// waiting ones no longer in force (superseded, matched or forgotten), so a
// reschedule to a far time does not keep its heap entry until then.
func (c *commands) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := now.Add(-c.ttl).UnixMilli()
	n := 0
	for n < len(c.ready) && c.ready[n].cmd.at < before {
		n++
	}
	c.ready = c.ready[n:]
	c.base += n
	keep := c.waiting[:0]
	for _, w := range c.waiting {
		if cmd, ok := c.byID[w.id]; ok && cmd.part == w.part && cmd.off == w.off && cmd.flags&liveMatched == 0 {
			keep = append(keep, w)
		}
	}
	clear(c.waiting[len(keep):])
	c.waiting = keep
	heap.Init(&c.waiting)
}

// any reports whether a command is in force, without taking the lock.
func (c *commands) any() bool { return c != nil && c.n.Load() > 0 }

// versionNow is the version of the commands, 0 with none (a nil table).
func (c *commands) versionNow() uint64 {
	if c == nil {
		return 0
	}
	return c.version.Load()
}

// unmove undoes matched(id, cmd, moved) after the transaction that moved the
// record aborted.
func (c *commands) unmove(id string, cmd command, moved string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.get(id); ok && cur.part == cmd.part && cur.off == cmd.off && cur.moved == moved {
		cur.moved, cur.matched = "", false
		c.put(id, cur)
	}
}
