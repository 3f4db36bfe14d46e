package main

import (
	"fmt"
	"strconv"
	"time"
)

// The --delay and --at of send and reschedule become the kdelay-delay and
// kdelay-deliver-at headers as typed, and kdelay reads a number in either as
// milliseconds. That is the wire contract, and a program writing a header
// means it. A person typing a number at a prompt may mean seconds, and a
// mistake of a factor of 1000 is delivered, silently, at the wrong time. So
// the command line refuses the numbers a person cannot have meant as
// milliseconds, before anything is written; the headers take them still.

// checkDueFlags refuses the --delay or --at a person cannot have meant as
// kdelay reads it.
func checkDueFlags(delay, at string) error {
	if err := checkDelayFlag(delay); err != nil {
		return err
	}
	return checkAtFlag(at)
}

// checkDelayFlag refuses a --delay that is a number without a unit: "5" is
// 5ms to kdelay, and a person typing it more likely meant 5s. Zero is zero
// in any unit.
func checkDelayFlag(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
		return nil // a Go duration, 0, or a mistake kdelay.ParseDelay names
	}
	return fmt.Errorf("--delay %s has no unit: did you mean %ss, or %sms? (a Go duration such as 90s or 1h30m)", v, v, v)
}

// Unix seconds have had ten digits since 2001 (1e9) and keep them until
// 2286; read as milliseconds, any of them falls in the first months of 1970.
const (
	secondsFrom  = 1_000_000_000
	secondsUntil = 10_000_000_000
)

// checkAtFlag refuses an --at of ten digits: `date +%s`, unix seconds, which
// kdelay would read as milliseconds, a time in 1970, and deliver at once.
// As milliseconds it would be a due time decades past, which nobody means.
func checkAtFlag(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < secondsFrom || n >= secondsUntil {
		return nil
	}
	meant := time.Unix(n, 0).UTC().Format(time.RFC3339)
	return fmt.Errorf("--at %s looks like unix seconds (%s), and kdelay reads a number as milliseconds (%s): give %d000, or RFC 3339 such as %s",
		v, meant, time.UnixMilli(n).UTC().Format(timeFormat), n, meant)
}

// alreadyDue says that a due time before now, the record's timestamp, has
// passed; "" when it has not. Only --at can be in the past: a delay is never
// negative.
func alreadyDue(due, now time.Time) string {
	if !due.Before(now) {
		return ""
	}
	return due.UTC().Format(timeFormat) + " is already past"
}
