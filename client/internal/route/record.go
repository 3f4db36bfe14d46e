package route

import (
	"fmt"
	"time"

	"github.com/kdelay/kdelay"
)

// header is a record header of franz-go or kafka-go, as kdelay.Parse takes.
type header interface {
	~struct {
		Key   string
		Value []byte
	}
}

// Options are what a caller adds to a delayed record besides its own
// headers. Package client's Option sets them.
type Options struct {
	ID      string // the kdelay-id, when HasID
	HasID   bool
	Headers []kdelay.Header // after the record's own
	Prefix  string          // kdelay's topic prefix, for Delayed; "" for the producer's
}

// Apply returns the options opts set: package client's Options, which
// package kafkago shares.
func Apply[O ~func(*Options)](opts []O) Options {
	var o Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Record plans a record with headers hs for target, due at due, planned at
// now, and returns its plan and the headers to produce it with.
//
// It builds the record the way the server's ingress router reads one and
// parses it with kdelay.Parse, so that a record the server would dead-letter
// fails here with the server's own reason: the caller's routing headers
// other than kdelay-id are dropped (they would be set twice), o's id replaces
// a kdelay-id of the caller's, a record with neither gets a new id, and
// kdelay-deliver-at and kdelay-target are the planned ones. The headers
// returned are what the ingress router writes for the next hop,
// kdelay.AppendHop of what Parse read, which parses back to the same route
// (kdelay's FuzzParse checks it).
func Record[H header](p Planner, target string, hs []H, o Options, now, due time.Time) (Plan, []H, error) {
	in := make([]H, 0, len(hs)+len(o.Headers)+3)
	hasID := o.HasID
	for _, h := range hs {
		in, hasID = keep(in, h, o.HasID, hasID)
	}
	for _, h := range o.Headers {
		in, hasID = keep(in, H(h), o.HasID, hasID)
	}
	if o.HasID {
		in = append(in, H(kdelay.Header{Key: kdelay.HeaderID, Value: []byte(o.ID)}))
	} else if !hasID {
		in = append(in, H(kdelay.Header{Key: kdelay.HeaderID, Value: []byte(p.NewID())}))
	}
	in = append(in,
		H(kdelay.Header{Key: kdelay.HeaderDeliverAt, Value: kdelay.AppendDeliverAt(nil, due)}),
		H(kdelay.Header{Key: kdelay.HeaderTarget, Value: []byte(target)}))
	rt, user, err := kdelay.Parse(now, in, kdelay.Rules{Topics: p.Topics, MaxDelay: p.MaxDelay})
	if err != nil {
		return Plan{}, nil, fmt.Errorf("kdelay would dead-letter it: %w", err)
	}
	pl := Plan{Topic: p.Topics.Ingress(), Timestamp: now, Due: rt.Due, ID: rt.ID}
	if l, ok := p.Levels.For(rt.Due.Sub(now)); ok {
		pl.Topic, pl.Level = p.Topics.Level(l.Name), l.Name
	}
	return pl, kdelay.AppendHop(user, rt.Target, rt.ID, rt.Due), nil
}

// keep appends h to hs unless it is a routing header the producer sets:
// kdelay-target, kdelay-delay, kdelay-deliver-at, and kdelay-id when the
// caller's options set it (replace). It reports whether hs has a kdelay-id.
func keep[H header](hs []H, h H, replaceID, hasID bool) ([]H, bool) {
	k := kdelay.Header(h).Key
	if kdelay.IsRouting(k) && (k != kdelay.HeaderID || replaceID) {
		return hs, hasID
	}
	return append(hs, h), hasID || k == kdelay.HeaderID
}
