package forwarder

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// envelope is what a record's routing headers say, checked and fixed once: the
// absolute due time, the target and the id. The user's own headers travel with
// it untouched and in order.
type envelope struct {
	target string
	due    time.Time
	id     string
	key    []byte
	value  []byte
	user   []kgo.RecordHeader // every header but the four routing ones
}

// rules are what parse checks a record against.
type rules struct {
	maxDelay time.Duration
	own      map[string]bool // kdelay's own topics, which are never targets
}

// badRecord is a record kdelay cannot route; its message goes to the DLQ.
type badRecord struct{ msg string }

func (e *badRecord) Error() string { return e.msg }

func bad(format string, args ...any) error { return &badRecord{fmt.Sprintf(format, args...)} }

// routingHeaders are the headers parse reads; the rest are the user's.
var routingHeaders = [...]string{kdelay.HeaderTarget, kdelay.HeaderDelay, kdelay.HeaderDeliverAt, kdelay.HeaderID}

// routing is the value of each routing header and how often it appeared, in
// the order of routingHeaders. An array, not a map: parse runs per record.
type routing [len(routingHeaders)]struct {
	value string
	n     int
}

func routingIndex(name string) int {
	for i, h := range routingHeaders {
		if h == name {
			return i
		}
	}
	return -1
}

// parse reads the routing headers of r. A relative delay counts from the
// record's timestamp, so the due time is fixed once, at the first hop, and
// every later hop plans from it.
func parse(r *kgo.Record, rl rules) (envelope, error) {
	env := envelope{key: r.Key, value: r.Value}
	var rt routing
	for _, h := range r.Headers {
		if i := routingIndex(h.Key); i >= 0 {
			rt[i].value = string(h.Value)
			rt[i].n++
			continue
		}
		env.user = append(env.user, h)
	}
	for i, h := range rt {
		if h.n > 1 {
			return env, bad("header %s appears %d times; set it once", routingHeaders[i], h.n)
		}
	}
	one := func(name string) (string, bool) {
		h := rt[routingIndex(name)]
		return h.value, h.n > 0
	}

	target, ok := one(kdelay.HeaderTarget)
	switch {
	case !ok || target == "":
		return env, bad("header %s is missing; set it to the topic to deliver to", kdelay.HeaderTarget)
	case !validTopic(target):
		return env, bad("header %s %q is not a valid topic name: use letters, digits, '.', '_' and '-', at most 249 characters", kdelay.HeaderTarget, target)
	case rl.own[target]:
		return env, bad("header %s names kdelay's own topic %q; set it to the topic consumers read", kdelay.HeaderTarget, target)
	}
	env.target = target

	delay, hasDelay := one(kdelay.HeaderDelay)
	at, hasAt := one(kdelay.HeaderDeliverAt)
	var err error
	switch {
	case hasDelay && hasAt:
		return env, bad("both %s and %s are set; set exactly one", kdelay.HeaderDelay, kdelay.HeaderDeliverAt)
	case hasDelay:
		env.due, err = dueAfter(r.Timestamp, delay, rl.maxDelay)
	case hasAt:
		env.due, err = dueAt(r.Timestamp, at, rl.maxDelay)
	default:
		return env, bad("neither %s nor %s is set; set one, e.g. %s=90s", kdelay.HeaderDelay, kdelay.HeaderDeliverAt, kdelay.HeaderDelay)
	}
	if err != nil {
		return env, err
	}
	// Kafka carries milliseconds: round a finer due time up, never down, so
	// that the epoch milliseconds kdelay writes are never before it.
	env.due = ceilMillis(env.due)

	env.id, ok = one(kdelay.HeaderID)
	if !ok || env.id == "" {
		env.id = source(r)
	}
	return env, nil
}

// source is topic/partition/offset, the record's place in Kafka. It is also
// the id of a record that came without one, so a replay keeps its id.
func source(r *kgo.Record) string {
	return r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
}

func dueAfter(ts time.Time, v string, maxDelay time.Duration) (time.Time, error) {
	var d time.Duration
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		if ms < 0 {
			return time.Time{}, negative(v)
		}
		if ms > maxDelay.Milliseconds() {
			return time.Time{}, tooFar(kdelay.HeaderDelay, v, maxDelay)
		}
		d = time.Duration(ms) * time.Millisecond
	} else if errors.Is(err, strconv.ErrRange) {
		return time.Time{}, bad("%s %q overflows; use at most %d milliseconds", kdelay.HeaderDelay, v, maxDelay.Milliseconds())
	} else if d, err = time.ParseDuration(v); err != nil {
		return time.Time{}, bad("%s %q is neither integer milliseconds nor a Go duration such as 90s or 1h30m", kdelay.HeaderDelay, v)
	}
	if d < 0 {
		return time.Time{}, negative(v)
	}
	if d > maxDelay {
		return time.Time{}, tooFar(kdelay.HeaderDelay, v, maxDelay)
	}
	return ts.Add(d), nil
}

func dueAt(ts time.Time, v string, maxDelay time.Duration) (time.Time, error) {
	var due time.Time
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		due = time.UnixMilli(ms)
	} else if errors.Is(err, strconv.ErrRange) {
		return time.Time{}, bad("%s %q overflows; use unix epoch milliseconds or RFC 3339", kdelay.HeaderDeliverAt, v)
	} else if due, err = time.Parse(time.RFC3339Nano, v); err != nil {
		return time.Time{}, bad("%s %q is neither unix epoch milliseconds nor RFC 3339 such as 2026-11-22T08:00:00Z", kdelay.HeaderDeliverAt, v)
	}
	if due.Sub(ts) > maxDelay {
		return time.Time{}, tooFar(kdelay.HeaderDeliverAt, v, maxDelay)
	}
	return due, nil
}

func tooFar(header, v string, maxDelay time.Duration) error {
	return bad("%s %q is more than the maximum delay %s (max-delay) away; deliver sooner or raise max-delay", header, v, maxDelay)
}

func negative(v string) error {
	return bad("%s %q is negative; use a delay of 0 or more, or %s for a time", kdelay.HeaderDelay, v, kdelay.HeaderDeliverAt)
}

func ceilMillis(t time.Time) time.Time {
	if tr := t.Truncate(time.Millisecond); !tr.Equal(t) {
		return tr.Add(time.Millisecond)
	}
	return t
}

// validTopic applies Kafka's rule for topic names, so a bad target gets the
// same clear reason from every broker.
func validTopic(name string) bool {
	if len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for _, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
