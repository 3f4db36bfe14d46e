package schedule

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestParseProgress: a progress record is read from kdelay's own headers,
// the last ones, in any order among them: kdelay-progress-next first or
// last, empty for no next occurrence, absent in a record written before it
// (next not known); a header of the user's in a snapshot's copy, named like
// one of kdelay's, stays the user's; a record with a header kdelay cannot
// read, or without its version and count, is not a progress.
func TestParseProgress(t *testing.T) {
	t.Parallel()
	written := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)
	next := time.Date(2026, 3, 30, 1, 0, 0, 0, time.UTC)
	nextSeconds, _ := seconds(next)
	for _, c := range []struct {
		name    string
		headers []string // key, value, ...
		want    progress
		ok      bool
	}{
		{"written before kdelay-progress-next: next not known",
			[]string{headerVersion, "7", headerCount, "3", headerWritten, "2026-03-29T01:00:00Z"},
			progress{written: written, version: 7, count: 3, inForce: -1}, true},
		{"kdelay-progress-next last",
			[]string{headerVersion, "7", headerCount, "3", headerWritten, "2026-03-29T01:00:00Z", headerNext, "2026-03-30T01:00:00Z"},
			progress{written: written, version: 7, count: 3, inForce: -1, hasNext: true, next: nextSeconds}, true},
		{"kdelay-progress-next first",
			[]string{headerNext, "2026-03-30T01:00:00Z", headerVersion, "7", headerCount, "3", headerWritten, "2026-03-29T01:00:00Z"},
			progress{written: written, version: 7, count: 3, inForce: -1, hasNext: true, next: nextSeconds}, true},
		{"kdelay-progress-next empty: no next occurrence",
			[]string{headerVersion, "7", headerCount, "3", headerWritten, "2026-03-29T01:00:00Z", headerNext, ""},
			progress{written: written, version: 7, count: 3, inForce: -1, hasNext: true}, true},
		{"kdelay-progress-next in a snapshot, before the offset it keeps",
			[]string{"source", "user", "kdelay-schedule", "@daily", "kdelay-target", "t",
				headerVersion, "7", headerCount, "3", headerNext, "2026-03-30T01:00:00Z", headerSchedule, "7"},
			progress{version: 7, count: 3, inForce: 7, hasNext: true, next: nextSeconds}, true},
		{"a user's kdelay-progress-next in a snapshot's copy is the user's",
			[]string{headerNext, "2026-03-30T01:00:00Z", "kdelay-schedule", "@daily", "kdelay-target", "t",
				headerVersion, "7", headerCount, "3", headerSchedule, "7"},
			progress{version: 7, count: 3, inForce: 7}, true},
		{"kdelay-progress-next not a time",
			[]string{headerVersion, "7", headerCount, "3", headerNext, "tomorrow"}, progress{}, false},
		{"no count", []string{headerVersion, "7", headerNext, "2026-03-30T01:00:00Z"}, progress{}, false},
		{"a load fence: no header", nil, progress{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := &kgo.Record{Key: progressKey("daily"), Value: []byte{}}
			for i := 0; i+1 < len(c.headers); i += 2 {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: c.headers[i], Value: []byte(c.headers[i+1])})
			}
			got, ok := parseProgress(r)
			if ok != c.ok || ok && got != c.want {
				t.Errorf("parseProgress of %v: %+v (%v), want %+v (%v)", c.headers, got, ok, c.want, c.ok)
			}
		})
	}
}
