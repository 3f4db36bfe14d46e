package kdelay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// FuzzParse feeds Parse any headers: one per line, "key=value", or "key"
// alone for a null value. Run it with
//
//	go test -fuzz FuzzParse -fuzztime 1m .
//
// The seed corpus is testdata/fuzz/FuzzParse plus the cases added here.
// Whatever the input: no panic; a refused record has a reason; an accepted
// one has a valid target that is not kdelay's own, a due time on the whole
// millisecond within max-delay of its timestamp, and the headers kdelay
// writes for its next hop parse back to the same route.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"kdelay-target=orders\nkdelay-delay=90s",
		"kdelay-target=orders\nkdelay-delay=90000\nkdelay-id=order-42",
		"kdelay-target=orders\nkdelay-deliver-at=2026-11-23T08:00:00.5+01:00",
		"kdelay-target=orders\nkdelay-deliver-at=2026-11-23t08:00:00z",
		"kdelay-target=orders\nkdelay-deliver-at=2026-11-23T08:00:00+24:00",
		"kdelay-target=orders\nkdelay-deliver-at=-1",
		"kdelay-target=orders\nkdelay-delay=1s\nkdelay-id",
		"kdelay-target=kdelay.level.1s\nkdelay-delay=1s",
		"kdelay-target=orders\nkdelay-delay=1s\nkdelay-delay=2s",
		"user=1\nkdelay-target=orders\nkdelay-delay=1.5ms\nuser=2",
	} {
		f.Add(int64(1795000000000), s)
	}
	rules := kdelay.Rules{MaxDelay: kdelay.DefaultMaxDelay}
	f.Fuzz(func(t *testing.T, tsMilli int64, raw string) {
		ts := time.UnixMilli(tsMilli)
		var in []kdelay.Header
		for line := range strings.Lines(raw) {
			k, v, hasValue := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
			h := kdelay.Header{Key: k}
			if hasValue {
				h.Value = []byte(v)
			}
			in = append(in, h)
		}
		rt, user, err := kdelay.Parse(ts, in, rules)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("refused with an empty reason: %q", raw)
			}
			return
		}
		if !kdelay.ValidTopic(rt.Target) || rules.Topics.Owns(rt.Target) {
			t.Fatalf("accepted target %q", rt.Target)
		}
		if rt.Due.Truncate(time.Millisecond) != rt.Due {
			t.Fatalf("due %s is not on a millisecond", rt.Due)
		}
		if rt.Due.Sub(ts) > rules.MaxDelay+time.Millisecond {
			t.Fatalf("due %s is more than max-delay after %s", rt.Due, ts)
		}
		for _, h := range user {
			if kdelay.IsRouting(h.Key) {
				t.Fatalf("routing header %s handed on as the user's", h.Key)
			}
		}
		id := rt.ID
		if id == "" {
			id = "source/0/0"
		}
		again, _, err := kdelay.Parse(rt.Due, kdelay.AppendHop(user, rt.Target, id, rt.Due), rules)
		if err != nil || !again.Due.Equal(rt.Due) || again.Target != rt.Target || again.ID != id {
			t.Fatalf("next hop parses to %+v, %v; want %+v with id %s", again, err, rt, id)
		}
	})
}

// FuzzParseDeliverAt checks that a kdelay-deliver-at value kdelay accepts is
// never before 1970, and that the epoch milliseconds kdelay writes for it
// parse back to the same time, rounded up: never earlier.
func FuzzParseDeliverAt(f *testing.F) {
	for _, s := range []string{"0", "1795000000000", "-1", "2026-11-23T08:00:00Z", "2026-11-23t08:00:00.123456789z",
		"2026-11-23T08:00:00+24:00", "2026-11-23T08:00:00-23:59", "1969-12-31T23:59:59.999Z", "+5", "0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		at, err := kdelay.ParseDeliverAt(v)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%q refused with an empty reason", v)
			}
			return
		}
		if at.Before(time.UnixMilli(0)) {
			t.Fatalf("%q accepted as %s, before 1970", v, at)
		}
		back, err := kdelay.ParseDeliverAt(kdelay.FormatDeliverAt(at))
		if err != nil || back.Before(at) || back.Sub(at) >= time.Millisecond {
			t.Fatalf("%q: %s formats to %s, which parses to %s, %v", v, at, kdelay.FormatDeliverAt(at), back, err)
		}
	})
}

// FuzzParseDelay checks that an accepted kdelay-delay is never negative and
// that FormatDelay's milliseconds are never shorter.
func FuzzParseDelay(f *testing.F) {
	for _, s := range []string{"0", "90000", "90s", "1h30m", "-1", "-5s", "1.5ms", "99999999999999999999", "9223372036854775", "+1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := kdelay.ParseDelay(v)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%q refused with an empty reason", v)
			}
			return
		}
		if d < 0 {
			t.Fatalf("%q accepted as %s", v, d)
		}
		if back, err := kdelay.ParseDelay(kdelay.FormatDelay(d)); err == nil && back < d {
			t.Fatalf("%q: %s formats to %s, shorter", v, d, kdelay.FormatDelay(d))
		}
	})
}
