package kdelay

import (
	"time"

	"github.com/robfig/cron/v3"
)

// Next returns the schedule's first occurrence after t, on the whole second,
// or the zero time when there is none (past Until, or none within five
// years). Count is not applied here: it counts what was delivered.
//
// Across a change of the zone's clocks (daylight saving time) a cron
// expression follows one of two rules, as Vixie cron and cronie do:
//
//   - An expression for every hour (its hour field is * or covers 0-23, as
//     @hourly does) follows elapsed time, as robfig/cron/v3 does: an hour the
//     clocks skip has no occurrences, and an hour they repeat has its
//     occurrences twice, once in each pass, because each of those hours
//     passed.
//   - Any other expression names its hours, and follows the wall clock: each
//     time it names happens once a day. A time the clocks skip happens at the
//     moment they jump (a daily 02:30 in Europe/Berlin happens at 03:00 CEST
//     on the last Sunday of March), and several such times are one
//     occurrence; a time the clocks repeat happens in the first pass only (at
//     02:30 CEST, not again at 02:30 CET, on the last Sunday of October).
//
// robfig/cron/v3 alone skips the first and repeats the second: a daily job
// would not run at all on one day and twice on another.
//
// @every follows elapsed time: each occurrence comes its interval after the
// one before, the first its interval after Start.
func (s Schedule) Next(t time.Time) time.Time {
	next := nextOf(s.schedule, t)
	if next.IsZero() || !s.Until.IsZero() && next.After(s.Until) {
		return time.Time{}
	}
	return next
}

// allHours is a cron.SpecSchedule's Hour field matching every hour.
const allHours = 1<<24 - 1

func nextOf(sched cron.Schedule, t time.Time) time.Time {
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok || spec.Hour&allHours == allHours {
		return sched.Next(t)
	}
	// Walk the wall clock as if the zone had no changes (UTC has none),
	// and map each time it names to the instant it happens at.
	wall := *spec
	wall.Location = time.UTC
	loc := spec.Location
	w := wallClock(t.In(loc))
	for {
		if w = wall.Next(w); w.IsZero() {
			return time.Time{}
		}
		// Times at or before t's own wall clock map to t or earlier; the
		// first one after it that maps after t is the answer. In a
		// repeated hour, t may be in the second pass while w maps to the
		// first: those are passed over.
		if at := instant(w, loc); at.After(t) {
			return at
		}
	}
}

// wallClock is t's wall clock as a time in UTC.
func wallClock(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant is when wall clock w (a time in UTC) happens in loc: at the jump
// when loc's clocks skip it, in the first pass when they repeat it.
func instant(w time.Time, loc *time.Location) time.Time {
	at := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	start, end := at.ZoneBounds()
	if got := wallClock(at); !got.Equal(w) {
		// time.Date read w in one of the zones either side of the gap.
		if got.After(w) {
			return start
		}
		return end
	}
	if start.IsZero() {
		return at
	}
	// The clocks went back at start by as much as the zone before it was
	// ahead: w may have happened first in that zone.
	_, before := start.Add(-time.Nanosecond).Zone()
	_, now := at.Zone()
	if back := time.Duration(before-now) * time.Second; back > 0 {
		if first := at.Add(-back); first.Before(start) && wallClock(first.In(loc)).Equal(w) {
			return first
		}
	}
	return at
}

// After returns the schedule's first occurrence after now, counted from its
// start as kdelay counts them (an @every's are its interval apart from the
// first, not from now), or the zero time when there is none. Count is not
// applied here.
func (s Schedule) After(now time.Time) time.Time {
	first := s.Next(s.Start)
	if first.IsZero() || first.After(now) {
		return first
	}
	return s.Next(s.Last(first, now.Add(time.Nanosecond)))
}

// Last returns the schedule's latest occurrence before before, from from
// on; from must be an occurrence, and before after it. kdelay asks it for
// the latest of the occurrences missed while no kdelay could write them
// (MissedLatest).
func (s Schedule) Last(from, before time.Time) time.Time {
	if every, ok := s.schedule.(cron.ConstantDelaySchedule); ok {
		// Each occurrence is the interval after the one before.
		n := (before.Sub(from) - time.Nanosecond) / every.Delay
		return from.Add(n * every.Delay)
	}
	// Look back over longer and longer spans, so that an expression of
	// every second walks a minute of seconds, not the whole outage.
	for _, back := range []time.Duration{time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 367 * 24 * time.Hour} {
		start := before.Add(-back)
		if !start.After(from) {
			break
		}
		if last := s.lastAfter(start, before, time.Time{}); !last.IsZero() {
			return last
		}
	}
	return s.lastAfter(from, before, from)
}

// lastAfter is the last occurrence after t and before before, or last
// when there is none.
func (s Schedule) lastAfter(t, before, last time.Time) time.Time {
	for next := s.Next(t); !next.IsZero() && next.Before(before); next = s.Next(next) {
		last = next
	}
	return last
}

// Has reports whether t is one of the schedule's occurrences: a replaced
// schedule's occurrences already written are kept when the new one has them
// too.
func (s Schedule) Has(t time.Time) bool {
	if t.Before(s.Next(s.Start)) {
		return false
	}
	if every, ok := s.schedule.(cron.ConstantDelaySchedule); ok {
		return t.Sub(s.Next(s.Start))%every.Delay == 0
	}
	return s.Next(t.Add(-time.Second)).Equal(t)
}
