package kdelay

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ParseDelay reads a kdelay-delay value: integer milliseconds ("90000") or a
// Go duration ("90s", "1h30m"). It refuses a negative delay and one that
// overflows a time.Duration (about 292 years); the caller checks its own
// maximum.
func ParseDelay(v string) (time.Duration, error) {
	var d time.Duration
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, tooLarge(v)
		}
		d = time.Duration(ms) * time.Millisecond
	} else if errors.Is(err, strconv.ErrRange) {
		return 0, tooLarge(v)
	} else if d, err = time.ParseDuration(v); err != nil {
		return 0, fmt.Errorf("%s %q is neither integer milliseconds nor a Go duration such as 90s or 1h30m", HeaderDelay, v)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s %q is negative; use a delay of 0 or more, or %s for a time", HeaderDelay, v, HeaderDeliverAt)
	}
	return d, nil
}

func tooLarge(v string) error {
	return fmt.Errorf("%s %q overflows; a delay is at most max-delay (default %d milliseconds, 400 days)", HeaderDelay, v, DefaultMaxDelay.Milliseconds())
}

// ParseDeliverAt reads a kdelay-deliver-at value: unix epoch milliseconds
// ("1795000000000") or RFC 3339 ("2026-11-23T08:00:00Z", lower-case t and z
// allowed, offsets from -23:59 to +23:59, at most nine fractional digits). It
// refuses a time before 1970, which a Kafka timestamp cannot carry: a negative
// epoch value is a mistake, not "now".
func ParseDeliverAt(v string) (time.Time, error) { return parseTime(HeaderDeliverAt, v) }

// parseTime reads a time in one of the forms of kdelay-deliver-at, naming
// header in its errors.
func parseTime(header, v string) (time.Time, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 {
			return time.Time{}, fmt.Errorf("%s %q is negative; use unix epoch milliseconds of 0 or more, or RFC 3339", header, v)
		}
		return time.UnixMilli(ms), nil
	} else if errors.Is(err, strconv.ErrRange) {
		return time.Time{}, fmt.Errorf("%s %q overflows; use unix epoch milliseconds or RFC 3339", header, v)
	}
	t, err := parseRFC3339(v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q is neither unix epoch milliseconds nor RFC 3339 such as 2026-11-23T08:00:00Z: %w", header, v, err)
	}
	if t.Before(time.UnixMilli(0)) {
		return time.Time{}, fmt.Errorf("%s %q is before 1970, which Kafka cannot carry; use a later time", header, v)
	}
	return t, nil
}

// rfc3339 is RFC 3339's date-time production (section 5.6) with the upper-case
// T and Z that parseRFC3339 folds to. Go's time.Parse alone is laxer: it takes
// one-digit hours, a comma before the fraction and an offset of +24:00.
var rfc3339 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$`)

func parseRFC3339(v string) (time.Time, error) {
	v = strings.Map(func(r rune) rune {
		switch r {
		case 't':
			return 'T'
		case 'z':
			return 'Z'
		}
		return r
	}, v)
	m := rfc3339.FindStringSubmatch(v)
	switch {
	case m == nil:
		return time.Time{}, errors.New("not of the form YYYY-MM-DDThh:mm:ss[.fraction](Z|+hh:mm|-hh:mm)")
	case len(m[1]) > 10:
		return time.Time{}, errors.New("more than nine fractional digits; kdelay keeps nanoseconds")
	case m[3] != "" && (m[3] > "23" || m[4] > "59"):
		return time.Time{}, fmt.Errorf("offset %s:%s is out of range; RFC 3339 offsets are at most 23:59", m[3], m[4])
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		// time.Parse says which field is out of range, e.g. "day out of range".
		_, reason, _ := strings.Cut(err.Error(), ": ")
		return time.Time{}, errors.New(cmp.Or(reason, err.Error()))
	}
	return t, nil
}

// CeilMillis rounds t up to the whole millisecond Kafka carries: rounding a
// due time up, never down, is what keeps kdelay from delivering early. It
// drops the monotonic reading, so durations to it are wall-clock durations,
// as Kafka's timestamps are.
func CeilMillis(t time.Time) time.Time {
	if tr := t.Truncate(time.Millisecond); !tr.Equal(t) {
		return tr.Add(time.Millisecond)
	}
	return t.Round(0)
}

// FormatDelay is d as a kdelay-delay value: whole milliseconds, rounded up.
func FormatDelay(d time.Duration) string {
	ms := d.Milliseconds()
	if time.Duration(ms)*time.Millisecond < d {
		ms++
	}
	return strconv.FormatInt(ms, 10)
}

// FormatDeliverAt is t as kdelay writes kdelay-deliver-at: unix epoch
// milliseconds, rounded up.
func FormatDeliverAt(t time.Time) string { return string(AppendDeliverAt(nil, t)) }

// maxDeliverAt is the longest FormatDeliverAt: an int64 with its sign.
const maxDeliverAt = len("-9223372036854775808")

// AppendDeliverAt appends FormatDeliverAt(t) to dst.
func AppendDeliverAt(dst []byte, t time.Time) []byte {
	return strconv.AppendInt(dst, CeilMillis(t).UnixMilli(), 10)
}

// DurationText writes d as a person would, in messages and help: 9600h and
// 1m30s rather than Go's 9600h0m0s and 1m30s, 1h rather than 1h0m0s.
func DurationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
