package kdelay

import (
	"fmt"
	"time"
)

// Commands change a pending message: a record written to the control topic
// (Topics.Control), keyed by the message's kdelay-id, with the header
// kdelay-command. The topic is compacted, so the last command for an id is
// the one in force, and a device that reschedules its deadline every second
// keeps one record, not thousands. docs/CANCEL.md
// states what each does.
const (
	// HeaderCommand names the command: CommandCancel, CommandReschedule or
	// CommandRunNow.
	HeaderCommand = "kdelay-command"

	// CommandCancel: the message is not delivered.
	CommandCancel = "cancel"

	// CommandReschedule: the message is delivered once, at the time set by
	// kdelay-delay (from the command record's timestamp) or
	// kdelay-deliver-at, as on an ingress record, and not at its old time.
	CommandReschedule = "reschedule"

	// CommandRunNow: the message is delivered at once, and not at its old
	// time.
	CommandRunNow = "run-now"
)

// Command is a control record, checked.
type Command struct {
	ID   string    // the message's kdelay-id: the record's key
	Name string    // CommandCancel, CommandReschedule or CommandRunNow
	Due  time.Time // the new due time: Reschedule's, or the command's timestamp for RunNow; zero for Cancel
}

// ParseCommand reads the control record with timestamp ts, key and headers
// hs, checked against rl as Parse checks a delayed record. Like Parse's, its
// errors say what is wrong and how to fix it. A record with a null value is
// not a command but the end of one (a tombstone): the caller tells them apart.
func ParseCommand[H header](ts time.Time, key []byte, hs []H, rl Rules) (Command, error) {
	var name, delay, at []byte
	var nName, nDelay, nAt int
	for _, h := range hs {
		switch Header(h).Key {
		case HeaderCommand:
			name, nName = Header(h).Value, nName+1
		case HeaderDelay:
			delay, nDelay = Header(h).Value, nDelay+1
		case HeaderDeliverAt:
			at, nAt = Header(h).Value, nAt+1
		}
	}
	switch {
	case len(key) == 0:
		return Command{}, fmt.Errorf("a command has no key; set the key to the kdelay-id of the message it is for")
	case key[0] == 0:
		return Command{}, fmt.Errorf("a command's key starts with a NUL byte, which kdelay keeps for its own records; use the message's kdelay-id")
	case nName == 0:
		return Command{}, fmt.Errorf("header %s is missing; set it to %s, %s or %s", HeaderCommand, CommandCancel, CommandReschedule, CommandRunNow)
	case nName > 1 || nDelay > 1 || nAt > 1:
		return Command{}, fmt.Errorf("a header appears more than once; set %s, and %s or %s, once each", HeaderCommand, HeaderDelay, HeaderDeliverAt)
	}
	c := Command{ID: string(key), Name: string(name)}
	switch c.Name {
	case CommandCancel, CommandRunNow:
		if nDelay+nAt > 0 {
			return Command{}, fmt.Errorf("%s %s takes no %s or %s; to deliver at another time use %s", HeaderCommand, c.Name, HeaderDelay, HeaderDeliverAt, CommandReschedule)
		}
		if c.Name == CommandRunNow {
			c.Due = CeilMillis(ts)
		}
		return c, nil
	case CommandReschedule:
		due, err := dueTime(ts, string(delay), nDelay > 0, string(at), nAt > 0, maxDelay(rl))
		if err != nil {
			return Command{}, fmt.Errorf("%s %s: %w", HeaderCommand, c.Name, err)
		}
		c.Due = due
		return c, nil
	}
	return Command{}, fmt.Errorf("header %s %q is not a command; set it to %s, %s or %s", HeaderCommand, name, CommandCancel, CommandReschedule, CommandRunNow)
}
