package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// lateness collects how late the records of one group arrived, in an HDR
// histogram of microseconds from 1µs to an hour with three significant
// digits: 0.1% error at any value, so p99.9 of a millisecond is exact to a
// microsecond.
type lateness struct {
	name string
	h    *hdrhistogram.Histogram

	sent, delivered, dups, early int64
	mostEarly                    time.Duration
	first, last                  time.Time // arrivals
	due                          time.Time // latest due time: the burst's single one
}

func newLateness(name string) *lateness {
	return &lateness{name: name, h: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// record counts one record that arrived at `at`, late by late. An early
// record counts as 0 in the histogram, so that percentiles stay about
// lateness, and in early and mostEarly, which must stay 0.
func (l *lateness) record(late time.Duration, due, at time.Time) {
	l.delivered++
	if late < 0 {
		l.early++
		l.mostEarly = max(l.mostEarly, -late)
		late = 0
	}
	us := min(late.Microseconds(), l.h.HighestTrackableValue())
	_ = l.h.RecordValue(us) // cannot fail: us is within the histogram's range
	if l.first.IsZero() || at.Before(l.first) {
		l.first = at
	}
	l.last = later(l.last, at)
	l.due = later(l.due, due)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// summary is what the report shows of the group.
func (l *lateness) summary() Group {
	q := func(p float64) time.Duration { return time.Duration(l.h.ValueAtPercentile(p)) * time.Microsecond }
	g := Group{
		Name: l.name, Sent: l.sent, Delivered: l.delivered, Lost: max(l.sent-l.delivered, 0),
		Duplicates: l.dups, Early: l.early, MostEarly: l.mostEarly,
	}
	if l.delivered == 0 {
		return g
	}
	g.P50, g.P90, g.P99, g.P999 = q(50), q(90), q(99), q(99.9)
	g.Max = time.Duration(l.h.Max()) * time.Microsecond
	return g
}

// throughput is delivered records per second from from until the last
// arrival; zero when that is no time at all.
func (l *lateness) throughput(from time.Time) float64 {
	span := l.last.Sub(from)
	if l.delivered == 0 || span <= 0 {
		return 0
	}
	return float64(l.delivered) / span.Seconds()
}
