package schedule

import (
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A schedule's progress is a record kdelay writes to the schedules topic,
// into the partition of the schedule, keyed by NUL + the schedule's id: the
// latest occurrence written into the ingress, and how many the schedule
// record in force wrote. Compaction keeps the last one per schedule, so the
// partition holds what a process taking it over needs, and nothing else.
//
// It is written after the occurrences it counts are acknowledged
// (at-least-once), or in their transaction (exactly-once): a crash between
// the two writes an occurrence again with the same kdelay-id, or neither.
// It outlives a deletion, so that a schedule created again under the same
// id never writes an occurrence at or before the latest one written, whose
// id a cancel may name.
const (
	headerWritten = "kdelay-progress-written" // RFC 3339 in UTC, to the nanosecond
	headerVersion = "kdelay-progress-version" // offset of the schedule record Count is for
	headerCount   = "kdelay-progress-count"   // occurrences that record wrote

	// The next occurrence its writer had to write after it: RFC 3339 in
	// UTC, empty for none. Read, not yet written: a process that does not
	// know a header refuses the record (splitHeaders), and one refused
	// writes the schedule's occurrences again from its start, so every
	// process of a fleet must read it before any writes it
	// (docs/design/schedules-at-scale.md, "Upgrade on a running fleet").
	headerNext = "kdelay-progress-next"

	// A snapshot (compact.go) also keeps the schedule record in force, so
	// that the records before it can go: one of these, last.
	headerSchedule = "kdelay-progress-schedule" // its offset; this record's value, timestamp and other headers are its
	headerDeleted  = "kdelay-progress-deleted"  // the offset of the tombstone in force, or of a record kdelay refused
)

type progress struct {
	written time.Time // the latest occurrence written, by any version
	version int64     // the offset of the schedule record (or tombstone) count is for
	count   int64

	// inForce is the offset of the schedule record a snapshot keeps
	// (headerSchedule or headerDeleted); -1 when the record is none.
	inForce int64
	deleted bool // the record in force is a tombstone, or refused

	// next is the writer's next occurrence to write (headerNext) as a slot
	// keeps it (seconds.go), 0 for none; hasNext is false when the record
	// has no such header, written by a kdelay before it: then next is not
	// known.
	hasNext bool
	next    uint32
}

// merge is what done and p say together: the latest occurrence written by
// either, and the count of the newer version. A snapshot's record in force
// is not merged: done is what applying it found.
func (p progress) merge(done progress) progress {
	if p.written.After(done.written) {
		done.written = p.written
	}
	switch {
	case p.version > done.version:
		done.version, done.count = p.version, p.count
	case p.version == done.version:
		done.count = max(done.count, p.count)
	}
	return done
}

// progressKey is the key of schedule id's progress.
func progressKey(id string) []byte { return append([]byte{0}, id...) }

// fenceKey is the key of a load fence (Scheduler.loadEnds): a progress
// record's NUL with no id and no header, which parseProgress refuses, so
// that neither a schedule nor a progress is read from it.
var fenceKey = progressKey("")

func progressRecord(topic string, partition int32, id string, p progress) *kgo.Record {
	hs := []kgo.RecordHeader{
		{Key: headerVersion, Value: strconv.AppendInt(nil, p.version, 10)},
		{Key: headerCount, Value: strconv.AppendInt(nil, p.count, 10)},
	}
	if !p.written.IsZero() {
		hs = append(hs, kgo.RecordHeader{Key: headerWritten, Value: []byte(p.written.UTC().Format(time.RFC3339Nano))})
	}
	// An empty value, not a null one: a null value would delete it.
	return &kgo.Record{Topic: topic, Partition: partition, Key: progressKey(id), Value: []byte{}, Headers: hs}
}

// parseProgress reads a progress record; ok is false when it is not one
// kdelay wrote. Its own headers are the last ones: those before them are a
// snapshot's copy of the schedule record in force, which may name a header
// of the user's like one of kdelay's.
func parseProgress(r *kgo.Record) (p progress, ok bool) {
	_, own := splitHeaders(r.Headers)
	p.inForce = -1
	var seen int
	for _, h := range own {
		var err error
		switch h.Key {
		case headerWritten:
			p.written, err = time.Parse(time.RFC3339Nano, string(h.Value))
		case headerVersion:
			p.version, err = strconv.ParseInt(string(h.Value), 10, 64)
			seen++
		case headerCount:
			p.count, err = strconv.ParseInt(string(h.Value), 10, 64)
			seen++
		case headerNext:
			p.next, err = parseNext(h.Value)
			p.hasNext = true
		case headerSchedule, headerDeleted:
			p.inForce, err = strconv.ParseInt(string(h.Value), 10, 64)
			p.deleted = h.Key == headerDeleted
		}
		if err != nil {
			return progress{}, false
		}
	}
	return p, seen == 2
}

// parseNext reads headerNext: 0 when empty.
func parseNext(v []byte) (uint32, error) {
	if len(v) == 0 {
		return 0, nil
	}
	t, err := time.Parse(time.RFC3339Nano, string(v))
	s, _ := seconds(t)
	return s, err
}

// splitHeaders parts a progress record's headers into those of the
// schedule record a snapshot copied, and kdelay's own, which come last.
func splitHeaders(hs []kgo.RecordHeader) (copied, own []kgo.RecordHeader) {
	i := len(hs)
	for i > 0 && slices.Contains(progressHeaders, hs[i-1].Key) {
		i--
	}
	return hs[:i], hs[i:]
}

var progressHeaders = []string{headerWritten, headerVersion, headerCount, headerNext, headerSchedule, headerDeleted}

// kept is the schedule record in force that snapshot r keeps, as it was
// read from the offset p.inForce: a tombstone when it was deleted or
// refused. p is r's progress, with p.inForce set.
func kept(r *kgo.Record, p progress) *kgo.Record {
	k := &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: p.inForce, Key: r.Key[1:], Timestamp: r.Timestamp}
	if !p.deleted {
		k.Headers, _ = splitHeaders(r.Headers)
		k.Value = r.Value
	}
	return k
}
