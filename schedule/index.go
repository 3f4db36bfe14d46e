package schedule

import (
	"hash/maphash"
	"unsafe"
)

// index is what a scheduler keeps of the schedule ids of one partition of
// the schedules topic between steps: a fixed-size slot per id, found by a
// hash of the id, and a queue of the slots by their next occurrence. The
// rest of a schedule (its value, headers, target and spec) stays in the
// topic and is read back at the slot's at offset when it is needed
// (docs/design/schedules-at-scale.md). An id, once in, stays until the
// index is dropped with its partition: a deleted schedule keeps its slot,
// so that one created again under its id never writes at or before the
// latest occurrence written.
//
// Nothing in it holds a pointer but the page list, so the collector never
// scans the slots, and nothing is allocated per id: a million ids cost
// under 72 bytes each (TestIndexMemory).
type index struct {
	seeds [2]maphash.Seed // the id's two hashes: hash, then check
	pages []*[pageSlots]slot
	n     int32   // slots in use, numbered from 0 in the order added
	table []int32 // open addressing, linear probing: slot number + 1, 0 for empty; a power of two long
	queue []int32 // slot numbers, a binary heap by next (index_queue.go)
}

// slot is one schedule id. 56 bytes, no pointer.
type slot struct {
	hash    uint64 // maphash of the id, the index's first seed
	version int64  // offset of the record in force: a schedule, its tombstone, or one refused; -1 for none read
	at      int64  // offset its value, headers and fields are read from: version, or the snapshot that copies it
	doneVer int64  // progress.version: the offset count is for; -1 for none
	count   int64  // progress.count
	next    uint32 // the next occurrence to write (seconds.go); 0 for none, and then not queued
	written uint32 // progress.written, the latest occurrence written by any version (seconds.go)
	pos     int32  // in the queue; -1 when not in it
	check   uint16 // the id's hash with the second seed: with hash, 80 bits tell two ids apart
	flags   uint8  // slotLive, slotNextUnknown, slotDeleted
}

const (
	slotLive        uint8 = 1 << iota // a schedule is in force: not deleted, not refused
	slotNextUnknown                   // next waits for the schedule to be read back (a progress without kdelay-progress-next)
	slotDeleted                       // the record in force is a tombstone: not live, and not refused either
)

// pageSlots is how many slots a page holds: 56 KiB, a whole number of the
// runtime's 8 KiB pages. Slots grow a page at a time, never by doubling, so
// at most one page of a partition is unused.
const pageSlots = 1024

// slotBytes is a slot's size, which the bound in SCHEDULES.md counts.
const slotBytes = int(unsafe.Sizeof(slot{}))

// boundBytes is what docs/SCHEDULES.md bounds a schedule id at: its slot
// and its share of the table and queue.
const boundBytes = 72

// MaxIndexBytes is the bound docs/SCHEDULES.md states for what a scheduler
// holds for n schedule ids spread over partitions partitions: boundBytes an
// id, and at most a page of slots unused in each partition with the least
// its table and queue start with. What kdelay_schedule_index_bytes may say.
func MaxIndexBytes(n, partitions int) int64 {
	return boundBytes*int64(n) + int64(partitions)*(pageSlots*int64(slotBytes)+8*4+8*4)
}

// key is an id's two hashes. Two ids of one partition share both with a
// chance under n²/2⁸¹ for n ids, drawn again each time the partition is
// loaded (the seeds are the index's).
type key struct {
	hash  uint64
	check uint16
}

func newIndex() *index {
	return &index{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// key is id's key in x.
func (x *index) key(id []byte) key {
	return key{hash: maphash.Bytes(x.seeds[0], id), check: uint16(maphash.Bytes(x.seeds[1], id))}
}

// len is how many ids x holds.
func (x *index) len() int { return int(x.n) }

// slot is slot number i; the pointer stays valid as x grows (pages never move).
func (x *index) slot(i int32) *slot { return &x.pages[i/pageSlots][i%pageSlots] }

// find returns the slot number of k, if x has it.
func (x *index) find(k key) (int32, bool) {
	if len(x.table) == 0 {
		return -1, false
	}
	for b := x.bucket(k); ; b = (b + 1) & x.mask() {
		i := x.table[b] - 1
		if i < 0 {
			return -1, false
		}
		if s := x.slot(i); s.hash == k.hash && s.check == k.check {
			return i, true
		}
	}
}

// add returns the slot number of k, adding a new slot for it if x has none:
// no record read (version, at and doneVer -1), not live, not queued.
func (x *index) add(k key) (i int32, added bool) {
	if i, ok := x.find(k); ok {
		return i, false
	}
	// Doubled at 7/8 full: a probe stays short, and the table costs 4.6
	// to 9.2 bytes an id.
	if int(x.n+1) > len(x.table)/8*7 {
		x.grow()
	}
	i = x.n
	if i%pageSlots == 0 {
		x.pages = append(x.pages, new([pageSlots]slot))
	}
	x.n++
	*x.slot(i) = slot{hash: k.hash, check: k.check, version: -1, at: -1, doneVer: -1, pos: -1}
	x.place(i)
	return i, true
}

func (x *index) mask() int        { return len(x.table) - 1 }
func (x *index) bucket(k key) int { return int(k.hash) & x.mask() }

// place puts slot i in the first empty bucket from its own.
func (x *index) place(i int32) {
	b := x.bucket(key{hash: x.slot(i).hash})
	for x.table[b] != 0 {
		b = (b + 1) & x.mask()
	}
	x.table[b] = i + 1
}

// grow doubles the table and places every slot again. For a moment both
// tables are live: 12 bytes an id at most, before the old one goes.
func (x *index) grow() {
	x.table = make([]int32, max(8, 2*len(x.table)))
	for i := range x.n {
		x.place(i)
	}
}

// bytes is what x holds on the heap: its pages, table and queue as
// allocated, with their unused room.
func (x *index) bytes() int64 {
	return int64(cap(x.pages))*int64(unsafe.Sizeof(x.pages[0])) + int64(len(x.pages))*pageSlots*int64(slotBytes) +
		4*int64(cap(x.table)) + 4*int64(cap(x.queue))
}
