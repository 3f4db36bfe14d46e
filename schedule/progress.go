package schedule

import (
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
)

type progress struct {
	written time.Time // the latest occurrence written, by any version
	version int64     // the offset of the schedule record (or tombstone) count is for
	count   int64
}

// progressKey is the key of schedule id's progress.
func progressKey(id string) []byte { return append([]byte{0}, id...) }

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
// kdelay wrote.
func parseProgress(r *kgo.Record) (p progress, ok bool) {
	var seen int
	for _, h := range r.Headers {
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
		}
		if err != nil {
			return progress{}, false
		}
	}
	return p, seen == 2
}
