package fleet

import (
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// TestWillDo checks what a person is told once a command is written: what
// kdelay does if a message with the id is pending, and that whether one is
// cannot be told from here, for every command alike, since a command for
// an id nothing holds is written and kept all the same.
func TestWillDo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		c    kdelay.Command
		want string
	}{
		{"cancel", kdelay.Command{Name: kdelay.CommandCancel, ID: "order-42"},
			"if a message with kdelay-id order-42 is pending, kdelay will not deliver it. Whether one is, kdelay cannot tell here: the cancel is recorded either way."},
		{"reschedule later", kdelay.Command{Name: kdelay.CommandReschedule, ID: "order-43", Due: now.Add(30 * time.Second)},
			"if a message with kdelay-id order-43 is pending, kdelay will deliver it at 2026-11-22T08:00:30.000Z (in 30s), and not at its old time. Whether one is, kdelay cannot tell here: the reschedule is recorded either way."},
		{"reschedule to a time past", kdelay.Command{Name: kdelay.CommandReschedule, ID: "order-44", Due: now.Add(-time.Hour)},
			"if a message with kdelay-id order-44 is pending, kdelay will deliver it now (2026-11-22T07:00:00.000Z is already past), and not at its old time. Whether one is, kdelay cannot tell here: the reschedule is recorded either way."},
		{"run-now", kdelay.Command{Name: kdelay.CommandRunNow, ID: "order-45", Due: now},
			"if a message with kdelay-id order-45 is pending, kdelay will deliver it now (2026-11-22T08:00:00.000Z), and not at its old time. Whether one is, kdelay cannot tell here: the run-now is recorded either way."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := WillDo(tt.c, now); got != tt.want {
				t.Errorf("WillDo(%+v)\n got %q\nwant %q", tt.c, got, tt.want)
			}
		})
	}
}
