package fleet

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// DeadLetter is a record of the dead-letter topic, with what kdelay added to
// it.
type DeadLetter struct {
	Record    *kgo.Record
	Reason    string // kdelay-error
	Source    string // kdelay-source: where it failed
	Target    string // kdelay-target as the record carries it, "" if none
	Truncated string // kdelay-truncated: what was cut to fit the DLQ, "" if nothing
}

// ReadDeadLetter reads what kdelay added to dead letter r.
func ReadDeadLetter(r *kgo.Record) DeadLetter {
	d := DeadLetter{Record: r}
	d.Reason, _ = Header(r, kdelay.HeaderError)
	d.Source, _ = Header(r, kdelay.HeaderSource)
	d.Target, _ = Header(r, kdelay.HeaderTarget)
	d.Truncated, _ = Header(r, kdelay.HeaderTruncated)
	return d
}

// ID is the id the record is delivered with once replayed: its kdelay-id,
// which every record that made a hop carries; or, for a record that failed
// at the ingress without one, its source, which is the id the server gives
// such a record (kdelay.Source of its ingress place). Replaying it any
// number of times gives the same id, so a consumer that dedupes by id
// receives it once.
func (d DeadLetter) ID() string {
	id, ok := Header(d.Record, kdelay.HeaderID)
	if !ok {
		return d.Source
	}
	return id
}

// Age is how long ago the record was dead-lettered.
func (d DeadLetter) Age(now time.Time) time.Duration { return now.Sub(d.Record.Timestamp) }

// Place is where the dead letter itself is: dlq/partition/offset.
func (d DeadLetter) Place() string {
	return kdelay.Source(d.Record.Topic, d.Record.Partition, d.Record.Offset)
}

// Replay is the record to write to the ingress: the dead letter's key,
// value and headers without kdelay-error and kdelay-source, with kdelay-id
// set to ID(), and its timestamp, so a kdelay-delay counts from when it
// failed, not from the replay. It is checked with the server's own rules
// (kdelay.Parse): a record that would be dead-lettered again for what it
// carries is refused with that reason, since no fix outside it makes a
// replay succeed. A truncated dead letter is refused: what was cut is lost,
// and delivering the rest would hand consumers a record its producer never
// wrote.
func (d DeadLetter) Replay(rules kdelay.Rules) (*kgo.Record, error) {
	if d.Truncated != "" {
		return nil, fmt.Errorf("it was cut to fit %s (%s %s): the original is lost, so replaying it would deliver a record its producer never wrote; send it again from its producer",
			d.Record.Topic, kdelay.HeaderTruncated, d.Truncated)
	}
	if d.Source == "" {
		return nil, fmt.Errorf("it has no %s header, so it was not written by kdelay: it has no id to replay it with", kdelay.HeaderSource)
	}
	hs := make([]kgo.RecordHeader, 0, len(d.Record.Headers)+1)
	hasID := false
	for _, h := range d.Record.Headers {
		switch h.Key {
		case kdelay.HeaderError, kdelay.HeaderSource, kdelay.HeaderTruncated:
			continue
		case kdelay.HeaderID:
			hasID = true
		}
		hs = append(hs, h)
	}
	if !hasID {
		hs = append(hs, kgo.RecordHeader{Key: kdelay.HeaderID, Value: []byte(d.Source)})
	}
	r := &kgo.Record{Topic: rules.Topics.Ingress(), Key: d.Record.Key, Value: d.Record.Value, Headers: hs, Timestamp: d.Record.Timestamp}
	if _, _, err := kdelay.Parse(r.Timestamp, r.Headers, rules); err != nil {
		return nil, fmt.Errorf("kdelay would dead-letter it again: %w", err)
	}
	return r, nil
}

// Filter selects dead letters: by a substring of the reason (any case), by
// target, and by source. The zero Filter selects every one.
type Filter struct {
	Reason, Target string
	Sources        map[string]bool // nil for any
}

// Empty reports whether f selects every dead letter.
func (f Filter) Empty() bool { return f.Reason == "" && f.Target == "" && f.Sources == nil }

// Match reports whether f selects d.
func (f Filter) Match(d DeadLetter) bool {
	return (f.Reason == "" || strings.Contains(strings.ToLower(d.Reason), strings.ToLower(f.Reason))) &&
		(f.Target == "" || d.Target == f.Target) &&
		(f.Sources == nil || f.Sources[d.Source])
}

// Describe is the filter in words, for "no dead letter matches ...".
func (f Filter) Describe() string {
	var parts []string
	if f.Reason != "" {
		parts = append(parts, fmt.Sprintf("reason containing %q", f.Reason))
	}
	if f.Target != "" {
		parts = append(parts, "target "+f.Target)
	}
	if f.Sources != nil {
		parts = append(parts, plural(len(f.Sources), "named source"))
	}
	return cmp.Or(strings.Join(parts, " and "), "any")
}

// Header returns the value of the first header of r called name.
func Header(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}
