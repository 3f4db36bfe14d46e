package route

import (
	"errors"
	"fmt"
	"time"

	"github.com/kdelay/kdelay"
)

// Control is a command record for the control topic, as both producers
// write it: the same topic, key, value, headers and timestamp, whichever
// Kafka library writes it.
type Control struct {
	Topic     string
	Key       []byte // the message's kdelay-id
	Value     []byte // empty, never nil: a null value is a tombstone, which only kdelay writes
	Timestamp time.Time
	Command   kdelay.Command // what the server will read from it
}

// When is package client's Delay, which this package cannot import.
type When interface {
	Due(now time.Time) (time.Time, error)
	String() string
}

// Command builds the record of command name (kdelay.CommandCancel,
// CommandReschedule or CommandRunNow) for the message with kdelay-id id,
// made at now; when is Reschedule's new due time, nil for the others. It
// checks the record with kdelay.ParseCommand, as the server will read it, so
// a command the server would refuse fails here with the server's reason.
//
// The new due time goes as kdelay-deliver-at, not as a delay: it is fixed
// once, from now, as Send fixes a record's, and stays the same whatever
// timestamp the broker keeps.
func Command[H header](p Planner, name, id string, when When, now time.Time) (Control, []H, error) {
	c, hs, err := command[H](p, name, id, when, now)
	if err != nil {
		if when != nil {
			return Control{}, nil, fmt.Errorf("%s %q %s: %w", name, id, when, err)
		}
		return Control{}, nil, fmt.Errorf("%s %q: %w", name, id, err)
	}
	return c, hs, nil
}

func command[H header](p Planner, name, id string, when When, now time.Time) (Control, []H, error) {
	if id == "" {
		return Control{}, nil, errors.New("the id is empty; pass the kdelay-id of the message: the id Send returned, or WithID's")
	}
	hs := []H{H(kdelay.Header{Key: kdelay.HeaderCommand, Value: []byte(name)})}
	if when != nil {
		due, err := when.Due(now)
		if err != nil {
			return Control{}, nil, err
		}
		hs = append(hs, H(kdelay.Header{Key: kdelay.HeaderDeliverAt, Value: kdelay.AppendDeliverAt(nil, due)}))
	}
	c := Control{Topic: p.Topics.Control(), Key: []byte(id), Value: []byte{}, Timestamp: now.Truncate(time.Millisecond)}
	cmd, err := kdelay.ParseCommand(c.Timestamp, c.Key, hs, kdelay.Rules{Topics: p.Topics, MaxDelay: p.MaxDelay})
	if err != nil {
		return Control{}, nil, fmt.Errorf("kdelay would refuse the command: %w", err)
	}
	c.Command = cmd
	return c, hs, nil
}
