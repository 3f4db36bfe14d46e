package schedule

import (
	"math"
	"time"
)

// A slot (index.go) keeps its times as uint32 seconds since 2000-01-01 UTC,
// 4 bytes where a time.Time takes 24, and exact: every occurrence of every
// schedule falls on a whole second (TestWholeSeconds). robfig/cron's
// SpecSchedule.Next rounds up to the second and ConstantDelaySchedule drops
// the nanoseconds, kdelay's wall-clock walk (kdelay.Schedule.Next) maps whole
// seconds to whole seconds, and @every takes whole seconds only.
//
// Why 2000 and not later: a schedule's next occurrence is the first after
// the record's timestamp when it has written none, and the tests run the
// scheduler in a synctest bubble, whose clock starts at 2000-01-01. The
// range ends in 2136.
//
// A time outside the range is clamped, and seconds says it was: one before
// it (only a record stamped before 2000 gives one; Kafka lets a producer
// set any timestamp) becomes the range's first second, due in any process,
// whose clock is past it. So a slot's next is when the scheduler looks at
// the schedule again, never later than its occurrence; the occurrence it
// writes comes from the schedule it reads back (nextToWrite), not from the
// slot.
const (
	epochUnix    = 946684800 // 2000-01-01T00:00:00Z
	firstSecond  = 1         // 0 is no time
	secondsRange = math.MaxUint32
)

// seconds is t as a slot keeps it: 0 for the zero time; exact is false when
// t was not a whole second in the range, and was clamped into it (rounded
// up when not whole).
func seconds(t time.Time) (s uint32, exact bool) {
	if t.IsZero() {
		return 0, true
	}
	u := t.Unix() - epochUnix
	whole := t.Nanosecond() == 0
	if !whole {
		u++
	}
	switch {
	case u < firstSecond:
		return firstSecond, false
	case u > secondsRange:
		return secondsRange, false
	}
	return uint32(u), whole
}

// fromSeconds is the time a slot keeps as s, in UTC; the zero time for 0.
func fromSeconds(s uint32) time.Time {
	if s == 0 {
		return time.Time{}
	}
	return time.Unix(epochUnix+int64(s), 0).UTC()
}
