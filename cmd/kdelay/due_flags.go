package main

import (
	"fmt"
	"time"

	"github.com/kdelay/kdelay/fleet"
)

// The --delay and --at of send and reschedule become the kdelay-delay and
// kdelay-deliver-at headers as typed, and kdelay reads a number in either as
// milliseconds. That is the wire contract, and a program writing a header
// means it. A person typing a number at a prompt may mean seconds, and a
// mistake of a factor of 1000 is delivered, silently, at the wrong time. So
// the command line refuses the numbers a person cannot have meant as
// milliseconds, before anything is written; the headers take them still.

// checkDueFlags refuses the --delay or --at a person cannot have meant as
// kdelay reads it (fleet.CheckDue), naming the flag.
func checkDueFlags(delay, at string) error {
	if err := fleet.CheckDue(delay, at); err != nil {
		return fmt.Errorf("--%w", err) // fleet's message starts with the field's name
	}
	return nil
}

// alreadyDue says that a due time before now, the record's timestamp, has
// passed; "" when it has not.
func alreadyDue(due, now time.Time) string { return fleet.AlreadyDue(due, now) }
