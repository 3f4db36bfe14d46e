package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/kdelay/kdelay"
)

// Delay says when a record is due: After a duration from when it is sent, or
// At a time. The zero Delay is After(0): due at once.
type Delay struct {
	after time.Duration
	at    time.Time
	abs   bool // At, not After
}

// After is due d after the record is sent. d must not be negative.
func After(d time.Duration) Delay { return Delay{after: d} }

// At is due at t. A time in the past is due at once.
func At(t time.Time) Delay { return Delay{at: t, abs: true} }

// Due returns when a record sent at now is due, rounded up to the
// millisecond: Kafka carries milliseconds, and rounding up is what keeps
// kdelay's promise of never delivering early. It fails for a negative After
// and for At of the zero time, which are mistakes rather than "now".
func (d Delay) Due(now time.Time) (time.Time, error) {
	switch {
	case d.abs && d.at.IsZero():
		return time.Time{}, errors.New("At(time.Time{}): the zero time; pass the time to deliver at, or After(0) for now")
	case d.abs:
		return kdelay.CeilMillis(d.at), nil
	case d.after < 0:
		return time.Time{}, fmt.Errorf("After(%s): negative delay; use After(0) to deliver now, or At(t) for a time", d.after)
	}
	return kdelay.CeilMillis(now.Add(d.after)), nil
}

// String is "after 1m30s" or "at 2026-11-22T08:00:00Z".
func (d Delay) String() string {
	if d.abs {
		return "at " + d.at.Format(time.RFC3339Nano)
	}
	return "after " + d.after.String()
}
