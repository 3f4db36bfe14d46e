package forwarder

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// partition is what a worker knows of one partition it owns. Records move
// from queue (fetched, head not yet due) to window (taken, not yet handed on
// or handed on but not yet committable). Only the loop goroutine and the
// rebalance callbacks touch it, under worker.mu.
type partition struct {
	id     int32
	queue  []*kgo.Record
	queued int64    // what queue counts in the worker's buffer
	window []*entry // in offset order

	// next is the offset after the last record taken from the queue: the
	// commit point once everything before it is handed on. Before any is
	// taken, it is the first record fetched: where fetching began, the
	// group's committed offset, never 0 by default.
	next      kgo.EpochOffset
	fetched   bool  // a record was fetched, so next is set
	committed int64 // last offset committed, -1 before the first commit
	from      int64 // the offset of the first record fetched: where reading began
	waiting   int   // entries of this partition held in memory (worker.held)
	flying    int   // entries handed to the client whose ack the loop has not applied
	notDue    bool  // its buffered records are not due soon: fetch no more
	paused    bool  // fetching paused, for notDue or a full buffer
	gone      bool  // revoked or lost: late acks for it are ignored
	// leaving is set while a rebalance callback takes the partition away
	// (markLeaving): the loop then hands on none of its records, which
	// only the callback does.
	leaving bool
	// skips and meta are exactly-once's (txn_skips.go): offsets ahead,
	// not taken yet, that a transaction committed before handed on, and
	// the metadata of the partition's last commit, which was at metaAt.
	skips  []int64
	meta   string
	metaAt int64
}

// entry is one taken record on its way out: produced to a level, the target
// or the DLQ, or held in memory until a time (a sub-level remainder, or a
// retry after a failed produce).
type entry struct {
	part     *partition
	src      *kgo.Record // nil once done
	offset   int64       // src's, kept once it is let go (txn_skips.go)
	out      *kgo.Record // what to produce
	at       time.Time   // when held: when to produce out
	dead     bool        // out is a dead letter
	done     bool        // the broker acknowledged out
	attempts int         // failed produces so far
	first    time.Time   // the first produce of out, from which DeliveryTimeout counts
	lastErr  error       // the last failure that says more than that the client gave up
	due      time.Time   // out is a delivery due then (kdelay-deliver-at); zero for a hop or a dead letter
	lateFrom time.Time   // lateness counts from this rather than due: written to the ingress past due
	size     int64       // what src counts in the worker's buffer
	id       string      // the message id, once routed: commands name it
	mark     *moveMark   // a copy moved ahead by a scan: marked once acknowledged

	// rec is where out is built the first time, in the entry's own
	// allocation rather than one more per record (see next).
	rec kgo.Record
}

// next returns the record to build e's out in: rec, the first time; a new
// one once out is set, since the client may still hold that one (a retry
// the client has not answered) and must never see it change.
func (e *entry) next() *kgo.Record {
	if e.out == nil {
		return &e.rec
	}
	return new(kgo.Record)
}

// letGo drops what e holds of the records, once it is done: the window keeps
// e until the entries before it are done too.
func (e *entry) letGo() {
	e.src, e.out, e.lastErr, e.rec = nil, nil, nil, kgo.Record{}
}

func newPartition(id int32, from int64) *partition {
	return &partition{id: id, committed: -1, from: from}
}

// enqueue appends fetched records to the queue and returns what they count
// in the worker's buffer.
func (p *partition) enqueue(rs []*kgo.Record) (size int64) {
	if !p.fetched && len(rs) > 0 {
		p.next = kgo.EpochOffset{Epoch: rs[0].LeaderEpoch, Offset: rs[0].Offset}
		p.fetched = true
	}
	p.queue = append(p.queue, rs...)
	for _, r := range rs {
		size += recordSize(r)
	}
	p.queued += size
	return size
}

// take moves the head of the queue into the window.
func (p *partition) take() *entry {
	r := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	p.next = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	e := &entry{part: p, src: r, offset: r.Offset, size: recordSize(r)}
	p.queued -= e.size
	p.window = append(p.window, e)
	return e
}

// commitPoint is the lowest offset not yet handed on: committing it never
// skips a record that has not reached its next topic, so a crash re-delivers
// instead of losing.
func (p *partition) commitPoint() kgo.EpochOffset {
	for len(p.window) > 0 && p.window[0].done {
		p.window[0] = nil
		p.window = p.window[1:]
	}
	if len(p.window) > 0 {
		src := p.window[0].src
		return kgo.EpochOffset{Epoch: src.LeaderEpoch, Offset: src.Offset}
	}
	return p.next
}

// restart is where reading the partition again replays exactly what was
// not committed: its last commit, or where reading began.
func (p *partition) restart() kgo.EpochOffset {
	if p.committed >= 0 {
		return kgo.EpochOffset{Epoch: -1, Offset: p.committed}
	}
	return kgo.EpochOffset{Epoch: -1, Offset: p.from}
}

// pending reports whether the partition has records taken but not done.
func (p *partition) pending() bool {
	p.commitPoint()
	return len(p.window) > 0
}

// holds reports whether the partition holds records that fetching more
// would add to: queued, or on their way to the broker, which acknowledges
// them within a round trip. Not those held in memory until their time: a
// remainder may wait for up to the smallest level, and the records behind
// it are due from when it was released, not from when it leaves
// (TestHeldRecordsDoNotPauseTheirPartition).
func (p *partition) holds() bool { return len(p.queue) > 0 || p.flying > 0 }
