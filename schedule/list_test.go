package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// TestListedNextAndOverdue is the table of what status says of a schedule
// from what the schedules topic holds: its next occurrence, and whether
// the next one to write is overdue.
func TestListedNextAndOverdue(t *testing.T) {
	t.Parallel()
	every := func(count string) kdelay.Schedule {
		hs := []kgo.RecordHeader{{Key: kdelay.HeaderSchedule, Value: []byte("@every 1m")}, {Key: kdelay.HeaderTarget, Value: []byte("t")}}
		if count != "" {
			hs = append(hs, kgo.RecordHeader{Key: kdelay.HeaderCount, Value: []byte(count)})
		}
		s, _, err := kdelay.ParseSchedule(minute(0, 0), []byte("s"), hs, kdelay.Rules{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name    string
		l       Listed
		now     time.Time
		next    time.Time
		overdue bool
	}{
		{"written a minute ahead: the next is written, none overdue", Listed{Schedule: every(""), Written: minute(5, 0)}, minute(4, 30), minute(5, 0), false},
		{"new: the first not due yet", Listed{Schedule: every("")}, minute(0, 30), minute(1, 0), false},
		{"new: the first due and not written", Listed{Schedule: every("")}, minute(1, 30), minute(2, 0), true},
		{"written up to 00:02 at 00:04:30: 00:03 overdue", Listed{Schedule: every(""), Written: minute(2, 0)}, minute(4, 30), minute(5, 0), true},
		{"count reached: no next, none overdue", Listed{Schedule: every("2"), Written: minute(2, 0), Count: 2}, minute(5, 0), time.Time{}, false},
		{"count reached, its last not delivered yet", Listed{Schedule: every("2"), Written: minute(2, 0), Count: 2}, minute(1, 30), minute(2, 0), false},
		{"a replacement counts its own", Listed{Schedule: every("2"), Written: minute(2, 0), Count: 0}, minute(3, 30), minute(4, 0), true},
		{"refused: never overdue", Listed{Err: errors.New("refused")}, minute(5, 0), time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.l.Next(tt.now); !got.Equal(tt.next) {
				t.Errorf("Next(%s) = %s, want %s", tt.now, got, tt.next)
			}
			if got := tt.l.Overdue(tt.now); got != tt.overdue {
				t.Errorf("Overdue(%s) = %v, want %v", tt.now, got, tt.overdue)
			}
		})
	}
}
