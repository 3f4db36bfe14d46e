package main

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

func TestLine(t *testing.T) {
	t.Parallel()
	due := time.UnixMilli(1795334400000)
	deliverAt := kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: []byte("1795334400000")}
	secondsLate := time.Date(2026, 11, 22, 8, 0, 1, 234_567_000, time.UTC)
	tests := []struct {
		name string
		r    *kgo.Record
		want string
	}{
		{"late", &kgo.Record{Partition: 1, Offset: 17, Key: []byte("k"), Value: []byte("hello"), Timestamp: due.Add(2345 * time.Microsecond),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("1")}, deliverAt}},
			due.Add(2345*time.Microsecond).Format("15:04:05.000") + `  1/17  late 2.3ms    key="k"  value="hello"  trace=1 kdelay-deliver-at=1795334400000`},
		{"within the millisecond", &kgo.Record{Value: []byte("v"), Timestamp: due, Headers: []kgo.RecordHeader{deliverAt}},
			due.Format("15:04:05.000") + `  0/0  late <1ms     key=-  value="v"  kdelay-deliver-at=1795334400000`},
		{"early", &kgo.Record{Value: []byte("v"), Timestamp: due.Add(-5 * time.Millisecond), Headers: []kgo.RecordHeader{deliverAt}},
			due.Add(-5*time.Millisecond).Format("15:04:05.000") + `  0/0  EARLY 5ms     key=-  value="v"  kdelay-deliver-at=1795334400000`},
		{"no header, binary value, spaced header", &kgo.Record{Value: []byte("a\nb"), Timestamp: due, Headers: []kgo.RecordHeader{{Key: "note", Value: []byte("two words")}}},
			due.Format("15:04:05.000") + `  0/0  -             key=-  value="a\nb"  note="two words"`},
		{"seconds late", &kgo.Record{Value: []byte("v"), Timestamp: secondsLate, Headers: []kgo.RecordHeader{{Key: kdelay.HeaderDeliverAt, Value: []byte("2026-11-22T08:00:00Z")}}},
			secondsLate.Format("15:04:05.000") + `  0/0  late 1.23s    key=-  value="v"  kdelay-deliver-at=2026-11-22T08:00:00Z`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := line(tt.r); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// A record read long after it arrived, as with --from-beginning (4.06s after
// its due time), is as late as its timestamp on the target says, not as late
// as the reading.
func TestLineFromBeginning(t *testing.T) {
	t.Parallel()
	due := time.UnixMilli(1795334400000)
	r := &kgo.Record{Value: []byte("v"), Timestamp: due.Add(32 * time.Millisecond),
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderDeliverAt, Value: []byte("1795334400000")}}}
	want := r.Timestamp.Format("15:04:05.000") + `  0/0  late 32ms     key=-  value="v"  kdelay-deliver-at=1795334400000`
	if got := line(r); got != want {
		t.Errorf("read 4.06s after its due time, a record that arrived 32ms late printed\n%s\nwant\n%s", got, want)
	}
}
