package kdelay

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header is a record header as franz-go (kgo.RecordHeader) and
// segmentio/kafka-go (kafka.Header) both define it, so that their headers
// convert to it, and Parse takes either without copying.
type Header struct {
	Key   string
	Value []byte
}

// header is any header type with Header's fields.
type header interface {
	~struct {
		Key   string
		Value []byte
	}
}

// routingHeaders are the headers kdelay routes by, in one place: Parse reads
// them, and drops them from what it hands on as the user's headers. The
// indexes below name their places.
var routingHeaders = [...]string{HeaderTarget, HeaderDelay, HeaderDeliverAt, HeaderID}

const (
	iTarget = iota
	iDelay
	iDeliverAt
	iID
)

// IsRouting reports whether name is one of the headers kdelay routes by:
// kdelay-target, kdelay-delay, kdelay-deliver-at or kdelay-id.
func IsRouting(name string) bool { return routingIndex(name) >= 0 }

// routingIndex is the place of name in routingHeaders, -1 for any other
// header. A switch, not a loop over routingHeaders: Parse asks it of every
// header of every record, and the compiler turns a switch on constants into
// a few comparisons of length and bytes.
func routingIndex(name string) int {
	switch name {
	case HeaderTarget:
		return iTarget
	case HeaderDelay:
		return iDelay
	case HeaderDeliverAt:
		return iDeliverAt
	case HeaderID:
		return iID
	}
	return -1
}

// Rules are what Parse checks a record against: the server's configuration.
type Rules struct {
	// Topics are kdelay's own topics, which are never a target. Default
	// prefix "kdelay".
	Topics Topics

	// MaxDelay is the longest delay accepted, from the record's timestamp.
	// Default DefaultMaxDelay, 400 days.
	MaxDelay time.Duration

	// LoadZone returns the time zone of a schedule's kdelay-time-zone
	// (ParseSchedule). Default time.LoadLocation, which builds the zone
	// anew, some kilobytes, at each call: a process holding many schedules
	// passes one that shares each zone.
	LoadZone func(name string) (*time.Location, error)
}

// Route is what a record's routing headers say, checked.
type Route struct {
	Target string
	Due    time.Time // on the whole millisecond, never before the time asked for
	ID     string    // the kdelay-id header; "" when absent, and then the id is the record's Source
}

// Parse reads the routing headers of a record with timestamp ts, checks them
// against rl, and returns the route and the other headers, in their order.
// Every error is a sentence saying what is wrong and how to fix it: kdelay
// puts it on the dead letter, and `kdelay send` prints it.
//
// A relative delay counts from ts, so the due time is fixed once, where the
// record enters, and every later hop plans from it. A due time is rounded up
// to the millisecond Kafka carries, never down. An empty or null value counts
// as set: a kdelay-target or kdelay-id that is empty is refused rather than
// taken as absent, because it is a producer's mistake that would otherwise
// go unseen (an id lost that way breaks deduplication).
func Parse[H header](ts time.Time, hs []H, rl Rules) (Route, []H, error) {
	var vals [len(routingHeaders)]seen
	routing := 0
	for _, h := range hs {
		if Header(h).Key == HeaderCommand {
			return Route{}, nil, fmt.Errorf("header %s is set: a command goes to the control topic %s, keyed by the message's id, not to the ingress", HeaderCommand, rl.Topics.Control())
		}
		if i := routingIndex(Header(h).Key); i >= 0 {
			vals[i].v, vals[i].n = Header(h).Value, vals[i].n+1
			routing++
		}
	}
	// The user's headers, with room for the ones AppendDelivered or
	// AppendHop add next, so that the forwarder builds its record without
	// copying these. No room for the routing headers: the forwarder parses
	// every record it moves, and this slice is most of what that allocates.
	user := make([]H, 0, len(hs)-routing+hopHeaders)
	if routing < len(hs) {
		for _, h := range hs {
			if routingIndex(Header(h).Key) < 0 {
				user = append(user, h)
			}
		}
	}
	for i, v := range vals {
		if v.n > 1 {
			return Route{}, user, fmt.Errorf("header %s appears %d times; set it once", routingHeaders[i], v.n)
		}
	}
	var text [len(routingHeaders)]string
	texts(&text, &vals)
	get := func(i int) (string, bool) { return text[i], vals[i].n > 0 }
	rt, err := route(ts, rl, get)
	return rt, user, err
}

// texts sets text[i] to the value of routing header i, the four in one
// allocation: the forwarder parses every record it moves, and a string each
// for the target, the id and the due time cost 7% of its CPU per record
// (docs/BENCHMARKS.md). They share that allocation for as long as one of them
// lives, a few dozen bytes.
func texts(text *[len(routingHeaders)]string, vals *[len(routingHeaders)]seen) {
	n := 0
	for _, v := range vals {
		n += len(v.v)
	}
	var b strings.Builder
	b.Grow(n)
	for _, v := range vals {
		b.Write(v.v)
	}
	all, at := b.String(), 0
	for i, v := range vals {
		text[i], at = all[at:at+len(v.v)], at+len(v.v)
	}
}

// seen is a routing header as Parse found it: its value, and how many times
// it was set.
type seen struct {
	v []byte
	n int
}

func route(ts time.Time, rl Rules, get func(int) (string, bool)) (Route, error) {
	target, hasTarget := get(iTarget)
	delay, hasDelay := get(iDelay)
	at, hasAt := get(iDeliverAt)
	id, hasID := get(iID)
	if err := rl.Topics.CheckTarget(target, hasTarget); err != nil {
		return Route{}, err
	}
	if hasID && id == "" {
		return Route{}, fmt.Errorf("header %s is empty; set it to the message id, or leave the header out for kdelay to give one", HeaderID)
	}
	due, err := dueTime(ts, delay, hasDelay, at, hasAt, maxDelay(rl))
	if err != nil {
		return Route{}, err
	}
	return Route{Target: target, Due: due, ID: id}, nil
}

func maxDelay(rl Rules) time.Duration { return cmp.Or(rl.MaxDelay, DefaultMaxDelay) }

func dueTime(ts time.Time, delay string, hasDelay bool, at string, hasAt bool, maxDelay time.Duration) (time.Time, error) {
	switch {
	case hasDelay && hasAt:
		return time.Time{}, fmt.Errorf("both %s and %s are set; set exactly one", HeaderDelay, HeaderDeliverAt)
	case hasDelay:
		d, err := ParseDelay(delay)
		if err != nil {
			return time.Time{}, err
		}
		if d > maxDelay {
			return time.Time{}, tooFar(HeaderDelay, delay, maxDelay)
		}
		return CeilMillis(ts.Add(d)), nil
	case hasAt:
		due, err := ParseDeliverAt(at)
		if err != nil {
			return time.Time{}, err
		}
		if due.Sub(ts) > maxDelay {
			return time.Time{}, tooFar(HeaderDeliverAt, at, maxDelay)
		}
		return CeilMillis(due), nil
	}
	return time.Time{}, fmt.Errorf("neither %s nor %s is set; set one, e.g. %s=90s", HeaderDelay, HeaderDeliverAt, HeaderDelay)
}

func tooFar(header, v string, maxDelay time.Duration) error {
	return fmt.Errorf("%s %q is more than the maximum delay %s (max-delay) away; deliver sooner or raise max-delay", header, v, DurationText(maxDelay))
}

// AppendDelivered appends the headers kdelay adds to a delivered record,
// after the user's: kdelay-id to dedupe by and kdelay-deliver-at, the due
// time in epoch milliseconds, to measure lateness by.
func AppendDelivered[H header](hs []H, id string, due time.Time) []H {
	// One allocation for both values: the forwarder does this for every
	// record it hands on.
	v := append(make([]byte, 0, len(id)+maxDeliverAt), id...)
	v = AppendDeliverAt(v, due)
	return append(hs,
		H(Header{Key: HeaderID, Value: v[:len(id):len(id)]}),
		H(Header{Key: HeaderDeliverAt, Value: v[len(id):]}),
	)
}

// hopHeaders is how many headers AppendHop appends, the most that kdelay
// appends to a record's own.
const hopHeaders = 3

// AppendHop appends the headers of a record waiting in a level topic: those
// of AppendDelivered, then kdelay-target. The next hop parses them as it
// would an ingress record's, and the due time stays absolute.
func AppendHop[H header](hs []H, target, id string, due time.Time) []H {
	return append(AppendDelivered(hs, id, due), H(Header{Key: HeaderTarget, Value: []byte(target)}))
}

// Source is topic/partition/offset, a record's place in Kafka. It is the id
// of a record that came without one, so a replay of the same record keeps its
// id, and the kdelay-source of a dead letter.
func Source(topic string, partition int32, offset int64) string {
	// One allocation: it is the id of every record that came without one.
	var b strings.Builder
	b.Grow(len(topic) + 2 + 11 + 20) // the slashes, and the longest int32 and int64 with signs
	b.WriteString(topic)
	b.WriteByte('/')
	var digits [20]byte
	b.Write(strconv.AppendInt(digits[:0], int64(partition), 10))
	b.WriteByte('/')
	b.Write(strconv.AppendInt(digits[:0], offset, 10))
	return b.String()
}
