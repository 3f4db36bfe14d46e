package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// commandTimeout bounds the wait for the broker to acknowledge a command.
const commandTimeout = 15 * time.Second

// TimeFormat is how times are shown to a person: UTC, to the millisecond
// Kafka keeps.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// CommandRecord builds the record of command name (kdelay.CommandCancel,
// CommandReschedule or CommandRunNow) for the message with kdelay-id id, and
// checks it with the server's own rules (kdelay.ParseCommand), so a command
// kdelay would refuse is refused here with the same reason. delay or at is
// a reschedule's new due time, as typed; "" for the others. Its timestamp is
// now, to the millisecond Kafka keeps, because a delay counts from it. The
// delay and the time go as typed, as with send: kdelay reads the same forms.
// Check them with CheckDue first when a person typed them.
func CommandRecord(name, id, delay, at string, rules kdelay.Rules, now time.Time) (*kgo.Record, kdelay.Command, error) {
	now = now.Truncate(time.Millisecond)
	hs := []kgo.RecordHeader{{Key: kdelay.HeaderCommand, Value: []byte(name)}}
	switch {
	case name == kdelay.CommandReschedule && (delay == "") == (at == ""):
		return nil, kdelay.Command{}, errors.New("set exactly one of delay (e.g. 30s) and at (e.g. 2026-11-22T08:00:00Z)")
	case delay != "":
		hs = append(hs, kgo.RecordHeader{Key: kdelay.HeaderDelay, Value: []byte(delay)})
	case at != "":
		hs = append(hs, kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: []byte(at)})
	}
	// An empty value, not a null one: a null value is a tombstone, which
	// only kdelay writes.
	r := &kgo.Record{Topic: rules.Topics.Control(), Key: []byte(id), Value: []byte{}, Headers: hs, Timestamp: now}
	c, err := kdelay.ParseCommand(now, r.Key, r.Headers, rules)
	if err != nil {
		return nil, kdelay.Command{}, fmt.Errorf("kdelay would refuse this command: %w", err)
	}
	return r, c, nil
}

// WriteCommand writes command record r and waits for the broker to
// acknowledge it; r then has its partition and offset. A control topic that
// does not exist is a *MissingTopicError.
func (f *Fleet) WriteCommand(ctx context.Context, r *kgo.Record) error {
	return f.produce(ctx, r)
}

// produce writes r and waits for the broker to acknowledge it, for at most
// commandTimeout; r then has its partition and offset. A topic that does
// not exist is a *MissingTopicError.
func (f *Fleet) produce(ctx context.Context, r *kgo.Record) error {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	err := f.cl.ProduceSync(ctx, r).FirstErr()
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return &MissingTopicError{Topic: r.Topic, Brokers: f.cfg.Brokers}
	}
	return err
}

// WillDo says what kdelay does with the message once it has read c, written
// at now: "in 30s" for a delay of 30s. It says so for a message that is
// pending, and that whether one is cannot be told here, for every command
// alike: a command for an id nothing holds is written and kept all the
// same (it acts on a record with that id sent while it is kept), and
// nothing here knows what the level topics hold.
func WillDo(c kdelay.Command, now time.Time) string {
	var will string
	switch past := AlreadyDue(c.Due, now); {
	case c.Name == kdelay.CommandCancel:
		will = "kdelay will not deliver it"
	case c.Name == kdelay.CommandRunNow:
		will = fmt.Sprintf("kdelay will deliver it now (%s), and not at its old time", c.Due.UTC().Format(TimeFormat))
	case past != "":
		will = fmt.Sprintf("kdelay will deliver it now (%s), and not at its old time", past)
	default:
		will = fmt.Sprintf("kdelay will deliver it at %s (in %s), and not at its old time", c.Due.UTC().Format(TimeFormat), c.Due.Sub(now).Round(time.Millisecond))
	}
	return fmt.Sprintf("if a message with kdelay-id %s is pending, %s. Whether one is, kdelay cannot tell here: the %s is recorded either way.", c.ID, will, c.Name)
}

// AlreadyDue says that a due time before now, the record's timestamp, has
// passed; "" when it has not. Only an absolute time can be in the past: a
// delay is never negative.
func AlreadyDue(due, now time.Time) string {
	if !due.Before(now) {
		return ""
	}
	return due.UTC().Format(TimeFormat) + " is already past"
}

// A delay or due time typed by a person becomes the kdelay-delay or
// kdelay-deliver-at header as typed, and kdelay reads a number in either as
// milliseconds. That is the wire contract, and a program writing a header
// means it. A person typing a number at a prompt or in a form may mean
// seconds, and a mistake of a factor of 1000 is delivered, silently, at the
// wrong time. So what people type is checked by CheckDue, before anything is
// written; the headers take such numbers still.

// CheckDue refuses the delay or the due time a person cannot have meant as
// kdelay reads it. Its messages start with the field's name, delay or at.
func CheckDue(delay, at string) error {
	if err := checkDelay(delay); err != nil {
		return err
	}
	return checkAt(at)
}

// checkDelay refuses a delay that is a number without a unit: "5" is 5ms to
// kdelay, and a person typing it more likely meant 5s. Zero is zero in any
// unit.
func checkDelay(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
		return nil // a Go duration, 0, or a mistake kdelay.ParseDelay names
	}
	return fmt.Errorf("delay %s has no unit: did you mean %ss, or %sms? (a Go duration such as 90s or 1h30m)", v, v, v)
}

// Unix seconds have had ten digits since 2001 (1e9) and keep them until
// 2286; read as milliseconds, any of them falls in the first months of 1970.
const (
	secondsFrom  = 1_000_000_000
	secondsUntil = 10_000_000_000
)

// checkAt refuses a due time of ten digits: `date +%s`, unix seconds, which
// kdelay would read as milliseconds, a time in 1970, and deliver at once.
// As milliseconds it would be a due time decades past, which nobody means.
func checkAt(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < secondsFrom || n >= secondsUntil {
		return nil
	}
	meant := time.Unix(n, 0).UTC().Format(time.RFC3339)
	return fmt.Errorf("at %s looks like unix seconds (%s), and kdelay reads a number as milliseconds (%s): give %d000, or RFC 3339 such as %s",
		v, meant, time.UnixMilli(n).UTC().Format(TimeFormat), n, meant)
}
