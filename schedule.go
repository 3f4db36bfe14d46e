package kdelay

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the zone database goes with the binary: a container without /usr/share/zoneinfo works

	"github.com/robfig/cron/v3"
)

// Recurring schedules: a record on the compacted topic Topics.Schedules,
// keyed by the schedule's id, says what to deliver, where and when; kdelay
// serve writes each occurrence into the ingress as an ordinary delayed
// record. The record's value is the payload of every occurrence, and its
// headers other than these are carried on every occurrence too. Writing
// another record with the same key replaces the schedule; a tombstone (a
// null value) deletes it. docs/SCHEDULES.md states what kdelay promises.
const (
	// HeaderSchedule is when the occurrences are: a cron expression with
	// seconds ("0 30 2 * * *": 02:30:00 every day), the same without
	// seconds ("30 2 * * *"), a descriptor (@yearly, @monthly, @weekly,
	// @daily, @hourly) or @every with a Go duration of whole seconds
	// ("@every 90s"). Required.
	HeaderSchedule = "kdelay-schedule"

	// HeaderTimeZone is the IANA time zone whose wall clock a cron
	// expression follows ("Europe/Berlin"). Optional: UTC when absent.
	HeaderTimeZone = "kdelay-time-zone"

	// HeaderUntil ends the schedule: no occurrence after this time, unix
	// epoch milliseconds or RFC 3339 as for HeaderDeliverAt. Optional.
	HeaderUntil = "kdelay-until"

	// HeaderCount ends the schedule after this many occurrences: a whole
	// number of 1 or more. A replacement counts its own. Optional.
	HeaderCount = "kdelay-count"

	// HeaderMissed says what happens to occurrences that fell due while
	// no kdelay could write them (all of them were down, say):
	// MissedLatest or MissedSkip. Optional: MissedLatest when absent.
	HeaderMissed = "kdelay-missed"
)

// The values of HeaderMissed.
const (
	// MissedLatest delivers the latest missed occurrence, once, at once,
	// and none of the earlier ones.
	MissedLatest = "latest"

	// MissedSkip delivers none of them.
	MissedSkip = "skip"
)

// Schedule is a schedule record, checked.
type Schedule struct {
	ID       string         // the record's key
	Spec     string         // HeaderSchedule as written
	Zone     *time.Location // HeaderTimeZone; time.UTC when absent
	Target   string         // HeaderTarget
	Until    time.Time      // HeaderUntil; zero for no end
	Count    int64          // HeaderCount; 0 for no limit
	Missed   string         // MissedLatest or MissedSkip
	Start    time.Time      // the record's timestamp: the first occurrence is after it
	schedule cron.Schedule
}

// ScheduleFields are a schedule record's headers as text, as a producer
// writes them; an empty field is left out. `kdelay schedule create` and the
// client build records with it, and check them with ParseSchedule.
type ScheduleFields struct {
	Spec, TimeZone, Target, Until, Count, Missed string
}

// Headers are the record's headers for f, in the order of the fields.
func (f ScheduleFields) Headers() []Header {
	var hs []Header
	for _, kv := range [...][2]string{
		{HeaderSchedule, f.Spec}, {HeaderTimeZone, f.TimeZone}, {HeaderTarget, f.Target},
		{HeaderUntil, f.Until}, {HeaderCount, f.Count}, {HeaderMissed, f.Missed},
	} {
		if kv[1] != "" {
			hs = append(hs, Header{Key: kv[0], Value: []byte(kv[1])})
		}
	}
	return hs
}

// Fields are the headers that give s again: ParseSchedule of them, with
// s.Start as the record's timestamp, returns s. kdelay copies a schedule
// record with them when it compacts the schedules topic itself
// (schedule.Config.Compact).
func (s Schedule) Fields() ScheduleFields {
	f := ScheduleFields{Spec: s.Spec, Target: s.Target}
	if s.Zone != nil && s.Zone != time.UTC {
		f.TimeZone = s.Zone.String()
	}
	if !s.Until.IsZero() {
		f.Until = s.Until.UTC().Format(time.RFC3339Nano)
	}
	if s.Count > 0 {
		f.Count = strconv.FormatInt(s.Count, 10)
	}
	if s.Missed != MissedLatest {
		f.Missed = s.Missed
	}
	return f
}

// scheduleHeaders are the headers ParseSchedule reads, in one place; the
// indexes below name their places.
var scheduleHeaders = [...]string{HeaderSchedule, HeaderTimeZone, HeaderTarget, HeaderUntil, HeaderCount, HeaderMissed}

const (
	sSpec = iota
	sZone
	sTarget
	sUntil
	sCount
	sMissed
)

// ParseSchedule reads the schedule record with timestamp ts, key and headers
// hs, checked against rl, and returns the schedule and the other headers, in
// their order, which every occurrence carries. Like Parse's, its errors say
// what is wrong and how to fix it. A record with a null value is not a
// schedule but its deletion (a tombstone): the caller tells them apart.
func ParseSchedule[H header](ts time.Time, key []byte, hs []H, rl Rules) (Schedule, []H, error) {
	var vals [len(scheduleHeaders)]seen
	var user []H
	for _, h := range hs {
		k := Header(h).Key
		if i := scheduleIndex(k); i >= 0 {
			vals[i].v, vals[i].n = Header(h).Value, vals[i].n+1
			continue
		}
		if k == HeaderCommand || IsRouting(k) {
			return Schedule{}, nil, fmt.Errorf("header %s is set: kdelay sets the id and due time of each occurrence itself; leave it out of a schedule", k)
		}
		user = append(user, h)
	}
	for i, v := range vals {
		if v.n > 1 {
			return Schedule{}, nil, fmt.Errorf("header %s appears %d times; set it once", scheduleHeaders[i], v.n)
		}
	}
	switch {
	case len(key) == 0:
		return Schedule{}, nil, errors.New("a schedule has no key; set the key to the schedule's id, e.g. daily-report")
	case key[0] == 0:
		return Schedule{}, nil, errors.New("a schedule's key starts with a NUL byte, which kdelay keeps for its own records; use another id")
	}
	get := func(i int) (string, bool) { return string(vals[i].v), vals[i].n > 0 }
	s, err := schedule(ts, string(key), rl, get)
	return s, user, err
}

func scheduleIndex(name string) int {
	for i, h := range scheduleHeaders {
		if h == name {
			return i
		}
	}
	return -1
}

func schedule(ts time.Time, id string, rl Rules, get func(int) (string, bool)) (Schedule, error) {
	s := Schedule{ID: id, Zone: time.UTC, Missed: MissedLatest, Start: ts}
	target, hasTarget := get(sTarget)
	if err := rl.Topics.CheckTarget(target, hasTarget); err != nil {
		return Schedule{}, err
	}
	s.Target = target
	var err error
	if zone, ok := get(sZone); ok {
		if s.Zone, err = loadZone(zone, rl.LoadZone); err != nil {
			return Schedule{}, err
		}
	}
	spec, ok := get(sSpec)
	if !ok {
		return Schedule{}, fmt.Errorf("header %s is missing; set it to a cron expression with seconds such as '0 30 2 * * *' (02:30:00 daily), or @every 90s, @hourly, @daily", HeaderSchedule)
	}
	s.Spec = spec
	if s.schedule, err = parseSpec(spec, s.Zone); err != nil {
		return Schedule{}, err
	}
	if until, ok := get(sUntil); ok {
		if s.Until, err = parseTime(HeaderUntil, until); err != nil {
			return Schedule{}, err
		}
	}
	if count, ok := get(sCount); ok {
		if s.Count, err = strconv.ParseInt(count, 10, 64); err != nil || s.Count < 1 {
			return Schedule{}, fmt.Errorf("%s %q is not a whole number of 1 or more; leave the header out for no limit", HeaderCount, count)
		}
	}
	if missed, ok := get(sMissed); ok {
		if missed != MissedLatest && missed != MissedSkip {
			return Schedule{}, fmt.Errorf("%s %q is neither %s nor %s; leave the header out for %s", HeaderMissed, missed, MissedLatest, MissedSkip, MissedLatest)
		}
		s.Missed = missed
	}
	if first := s.Next(ts); first.IsZero() {
		return Schedule{}, s.never(ts)
	}
	return s, nil
}

// never says why a schedule has no occurrence after ts.
func (s Schedule) never(ts time.Time) error {
	if !s.Until.IsZero() && !s.schedule.Next(ts).IsZero() {
		return fmt.Errorf("%s %s is before the first occurrence of %q: the schedule would never run; set a later time or leave the header out",
			HeaderUntil, s.Until.UTC().Format(time.RFC3339), s.Spec)
	}
	return fmt.Errorf("%s %q never occurs (within five years of %s): check the day of the month against the month, e.g. 30 Feb does not exist",
		HeaderSchedule, s.Spec, ts.UTC().Format(time.RFC3339))
}

func loadZone(name string, load func(string) (*time.Location, error)) (*time.Location, error) {
	// "Local" is the zone of whichever kdelay process owns the schedule,
	// which a fleet cannot promise to share.
	if name == "" || name == "Local" {
		return nil, fmt.Errorf("%s %q is not an IANA time zone; name one such as Europe/Berlin, or leave the header out for UTC", HeaderTimeZone, name)
	}
	if load == nil {
		load = time.LoadLocation
	}
	loc, err := load(name)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not an IANA time zone such as Europe/Berlin or America/New_York (names are case-sensitive); leave the header out for UTC", HeaderTimeZone, name)
	}
	return loc, nil
}

// parseSpec reads a kdelay-schedule value with robfig/cron/v3, the parser
// asynq and River build on, in zone.
func parseSpec(spec string, zone *time.Location) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		return nil, fmt.Errorf("%s %q names its time zone in the expression; set it in header %s instead", HeaderSchedule, spec, HeaderTimeZone)
	}
	if every, ok := strings.CutPrefix(spec, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(every))
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s %q: %q is not a Go duration such as 90s or 1h30m", HeaderSchedule, spec, every)
		case d < time.Second || d%time.Second != 0:
			return nil, fmt.Errorf("%s %q: an interval is whole seconds, at least 1s; kdelay's occurrences fall on the second", HeaderSchedule, spec)
		}
		return cron.Every(d), nil
	}
	p := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)
	sched, err := p.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %v; write a cron expression with seconds such as '0 30 2 * * *' (02:30:00 daily), five fields without seconds, or @every 90s, @hourly, @daily",
			HeaderSchedule, spec, err)
	}
	if s, ok := sched.(*cron.SpecSchedule); ok {
		s.Location = zone
	}
	return sched, nil
}

// OccurrenceID is the kdelay-id of the occurrence of schedule id at t:
// "daily-report@2026-03-29T01:00:00Z", the time in UTC, so that every
// kdelay process, and every write of the same occurrence, gives the same
// id, which consumers dedupe by.
func OccurrenceID(id string, t time.Time) string {
	return id + "@" + t.UTC().Format(time.RFC3339)
}
