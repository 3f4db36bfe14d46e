package bench

import (
	"slices"
	"testing"
	"time"
)

// TestRecordTraces: a scenario's records are timed from when writing
// started, and one that never arrived has no arrival time, even if the
// trace holds a zero time for it.
func TestRecordTraces(t *testing.T) {
	started := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return started.Add(time.Duration(ms) * time.Millisecond) }
	got := recordTraces("kdelay", started, []traced{
		{due: at(1500), first: at(3750), copies: 1},
		{due: at(2000), copies: 0, refused: true},
	})
	want := []RecordTrace{
		{Series: "kdelay", ID: 0, Due: 1500 * time.Millisecond, Arrived: 3750 * time.Millisecond, Copies: 1},
		{Series: "kdelay", ID: 1, Due: 2 * time.Second, Refused: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("recordTraces = %+v, want %+v", got, want)
	}
}
