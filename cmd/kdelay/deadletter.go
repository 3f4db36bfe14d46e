package main

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// deadLetter is a record of the dead-letter topic as `kdelay dlq` reads it.
type deadLetter struct {
	rec       *kgo.Record
	reason    string // kdelay-error
	source    string // kdelay-source: where it failed
	target    string // kdelay-target as the record carries it, "" if none
	truncated string // kdelay-truncated: what was cut to fit the DLQ, "" if nothing
}

func readDeadLetter(r *kgo.Record) deadLetter {
	d := deadLetter{rec: r}
	d.reason, _ = header(r, kdelay.HeaderError)
	d.source, _ = header(r, kdelay.HeaderSource)
	d.target, _ = header(r, kdelay.HeaderTarget)
	d.truncated, _ = header(r, kdelay.HeaderTruncated)
	return d
}

// id is the id the record is delivered with once replayed: its kdelay-id,
// which every record that made a hop carries; or, for a record that failed
// at the ingress without one, its source, which is the id the server gives
// such a record (kdelay.Source of its ingress place). Replaying it any
// number of times gives the same id, so a consumer that dedupes by id
// receives it once.
func (d deadLetter) id() string {
	id, ok := header(d.rec, kdelay.HeaderID)
	if !ok {
		return d.source
	}
	return id
}

// age is how long ago the record was dead-lettered.
func (d deadLetter) age(now time.Time) time.Duration { return now.Sub(d.rec.Timestamp) }

// place is where the dead letter itself is: dlq/partition/offset.
func (d deadLetter) place() string {
	return kdelay.Source(d.rec.Topic, d.rec.Partition, d.rec.Offset)
}

// replay is the record to write to the ingress: the dead letter's key, value
// and headers without kdelay-error and kdelay-source, with kdelay-id set to
// id(), and its timestamp, so a kdelay-delay counts from when it failed, not
// from the replay. It is checked with the server's own rules (kdelay.Parse):
// a record that would be dead-lettered again for what it carries is refused
// with that reason, since no fix outside it makes a replay succeed. A
// truncated dead letter is refused: what was cut is lost, and delivering the
// rest would hand consumers a record its producer never wrote.
func (d deadLetter) replay(rules kdelay.Rules) (*kgo.Record, error) {
	if d.truncated != "" {
		return nil, fmt.Errorf("it was cut to fit %s (%s %s): the original is lost, so replaying it would deliver a record its producer never wrote; send it again from its producer",
			d.rec.Topic, kdelay.HeaderTruncated, d.truncated)
	}
	if d.source == "" {
		return nil, fmt.Errorf("it has no %s header, so it was not written by kdelay: it has no id to replay it with", kdelay.HeaderSource)
	}
	hs := make([]kgo.RecordHeader, 0, len(d.rec.Headers)+1)
	hasID := false
	for _, h := range d.rec.Headers {
		switch h.Key {
		case kdelay.HeaderError, kdelay.HeaderSource, kdelay.HeaderTruncated:
			continue
		case kdelay.HeaderID:
			hasID = true
		}
		hs = append(hs, h)
	}
	if !hasID {
		hs = append(hs, kgo.RecordHeader{Key: kdelay.HeaderID, Value: []byte(d.source)})
	}
	r := &kgo.Record{Topic: rules.Topics.Ingress(), Key: d.rec.Key, Value: d.rec.Value, Headers: hs, Timestamp: d.rec.Timestamp}
	if _, _, err := kdelay.Parse(r.Timestamp, r.Headers, rules); err != nil {
		return nil, fmt.Errorf("kdelay would dead-letter it again: %w", err)
	}
	return r, nil
}

// filter selects dead letters: by a substring of the reason (any case), by
// target, and by source.
type filter struct {
	reason, target string
	sources        map[string]bool // nil for any
}

func (f filter) empty() bool { return f.reason == "" && f.target == "" && f.sources == nil }

func (f filter) match(d deadLetter) bool {
	return (f.reason == "" || strings.Contains(strings.ToLower(d.reason), strings.ToLower(f.reason))) &&
		(f.target == "" || d.target == f.target) &&
		(f.sources == nil || f.sources[d.source])
}

// describe is the filter in words, for "no dead letter matches ...".
func (f filter) describe() string {
	var parts []string
	if f.reason != "" {
		parts = append(parts, fmt.Sprintf("reason containing %q", f.reason))
	}
	if f.target != "" {
		parts = append(parts, "target "+f.target)
	}
	if f.sources != nil {
		parts = append(parts, plural(len(f.sources), "named source"))
	}
	return cmp.Or(strings.Join(parts, " and "), "any")
}
