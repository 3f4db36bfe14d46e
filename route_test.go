package kdelay_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// ts is the timestamp of the record every case is parsed from.
var ts = time.UnixMilli(1795000000000) // 2026-11-18T...Z

func hs(kv ...string) []kdelay.Header {
	var out []kdelay.Header
	for i := 0; i < len(kv); i += 2 {
		out = append(out, kdelay.Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return out
}

// TestParse is the wire contract's one table: every rule kdelay routes a
// record by, the form a producer writes and what kdelay makes of it. The
// forwarder, the client library and `kdelay send` all call Parse.
func TestParse(t *testing.T) {
	t.Parallel()
	const target = "orders"
	rules := kdelay.Rules{MaxDelay: 100 * time.Hour}
	ok := []struct {
		name    string
		headers []kdelay.Header
		due     time.Time
		id      string
	}{
		{"delay in milliseconds", hs("kdelay-target", target, "kdelay-delay", "90000"), ts.Add(90 * time.Second), ""},
		{"delay as a Go duration", hs("kdelay-target", target, "kdelay-delay", "1h30m"), ts.Add(90 * time.Minute), ""},
		{"delay of zero", hs("kdelay-target", target, "kdelay-delay", "0"), ts, ""},
		{"sub-millisecond delay rounds up", hs("kdelay-target", target, "kdelay-delay", "1.2ms"), ts.Add(2 * time.Millisecond), ""},
		{"delay of exactly max-delay", hs("kdelay-target", target, "kdelay-delay", "100h"), ts.Add(100 * time.Hour), ""},
		{"time in epoch milliseconds", hs("kdelay-target", target, "kdelay-deliver-at", "1795000005000"), ts.Add(5 * time.Second), ""},
		{"time in the past is due at once", hs("kdelay-target", target, "kdelay-deliver-at", "1"), time.UnixMilli(1), ""},
		{"epoch zero", hs("kdelay-target", target, "kdelay-deliver-at", "0"), time.UnixMilli(0), ""},
		{"RFC 3339 in UTC", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-19T08:00:00Z"), date(2026, 11, 19, 8, 0, 0, 0), ""},
		{"RFC 3339 lower-case t and z", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-19t08:00:00z"), date(2026, 11, 19, 8, 0, 0, 0), ""},
		{"RFC 3339 with an offset", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-19T09:30:00+01:30"), date(2026, 11, 19, 8, 0, 0, 0), ""},
		{"RFC 3339 offset +23:59", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T07:59:00+23:59"), date(2026, 11, 19, 8, 0, 0, 0), ""},
		{"RFC 3339 offset -00:00", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-19T08:00:00-00:00"), date(2026, 11, 19, 8, 0, 0, 0), ""},
		{"RFC 3339 fraction rounds up", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-19T08:00:00.000000001Z"), date(2026, 11, 19, 8, 0, 0, int(time.Millisecond)), ""},
		{"id kept", hs("kdelay-target", target, "kdelay-delay", "0", "kdelay-id", "order-42"), ts, "order-42"},
		{"target with every allowed character", hs("kdelay-target", "A-z_0.9", "kdelay-delay", "0"), ts, ""},
		{"another prefix's topic is a target", hs("kdelay-target", "other.ingress", "kdelay-delay", "0"), ts, ""},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt, _, err := kdelay.Parse(ts, c.headers, rules)
			if err != nil {
				t.Fatalf("Parse: %v, want due %s", err, c.due)
			}
			if !rt.Due.Equal(c.due) || rt.ID != c.id {
				t.Errorf("due %s id %q, want due %s id %q", rt.Due.UTC(), rt.ID, c.due.UTC(), c.id)
			}
		})
	}

	bad := []struct {
		name    string
		headers []kdelay.Header
		reason  string
	}{
		{"missing target", hs("kdelay-delay", "1s"), "kdelay-target is missing"},
		{"empty target", hs("kdelay-target", "", "kdelay-delay", "1s"), "kdelay-target is missing"},
		{"null target", []kdelay.Header{{Key: "kdelay-target"}, {Key: "kdelay-delay", Value: []byte("1s")}}, "kdelay-target is missing"},
		{"target is the ingress", hs("kdelay-target", "kdelay.ingress", "kdelay-delay", "1s"), "kdelay's own topic"},
		{"target is the DLQ", hs("kdelay-target", "kdelay.dlq", "kdelay-delay", "1s"), "kdelay's own topic"},
		{"target is the control topic", hs("kdelay-target", "kdelay.control", "kdelay-delay", "1s"), "kdelay's own topic"},
		{"a command written to the ingress", hs("kdelay-target", target, "kdelay-delay", "1s", "kdelay-command", "cancel"), "goes to the control topic kdelay.control"},
		{"target is a level, even one not configured", hs("kdelay-target", "kdelay.level.3d", "kdelay-delay", "1s"), "kdelay's own topic"},
		{"target with a space", hs("kdelay-target", "bad topic!", "kdelay-delay", "1s"), "not a valid topic name"},
		{"target of 250 characters", hs("kdelay-target", strings.Repeat("t", 250), "kdelay-delay", "1s"), "not a valid topic name"},
		{"target ..", hs("kdelay-target", "..", "kdelay-delay", "1s"), "not a valid topic name"},
		{"target not ASCII", hs("kdelay-target", "ordérs", "kdelay-delay", "1s"), "not a valid topic name"},
		{"both delay headers", hs("kdelay-target", target, "kdelay-delay", "1s", "kdelay-deliver-at", "1795000000000"), "set exactly one"},
		{"neither delay header", hs("kdelay-target", target), "neither kdelay-delay nor kdelay-deliver-at"},
		{"delay unparsable", hs("kdelay-target", target, "kdelay-delay", "soon"), `"soon" is neither integer milliseconds nor a Go duration`},
		{"delay empty", hs("kdelay-target", target, "kdelay-delay", ""), "is neither integer milliseconds"},
		{"delay negative milliseconds", hs("kdelay-target", target, "kdelay-delay", "-1"), "is negative"},
		{"delay negative duration", hs("kdelay-target", target, "kdelay-delay", "-5s"), "is negative"},
		{"delay overflows int64", hs("kdelay-target", target, "kdelay-delay", "99999999999999999999"), "overflows"},
		{"delay overflows a duration", hs("kdelay-target", target, "kdelay-delay", "9223372036854775"), "overflows"},
		{"delay above max-delay", hs("kdelay-target", target, "kdelay-delay", "101h"), "more than the maximum delay"},
		{"time unparsable", hs("kdelay-target", target, "kdelay-deliver-at", "tomorrow 8am"), "neither unix epoch milliseconds nor RFC 3339"},
		{"time negative", hs("kdelay-target", target, "kdelay-deliver-at", "-1"), "is negative"},
		{"time overflows", hs("kdelay-target", target, "kdelay-deliver-at", "99999999999999999999"), "overflows"},
		{"time above max-delay", hs("kdelay-target", target, "kdelay-deliver-at", "2999-01-01T00:00:00Z"), "more than the maximum delay"},
		{"time before 1970", hs("kdelay-target", target, "kdelay-deliver-at", "1969-12-31T23:59:59Z"), "before 1970"},
		{"offset +24:00", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T08:00:00+24:00"), "offset 24:00 is out of range"},
		{"offset minutes 60", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T08:00:00+01:60"), "offset 01:60 is out of range"},
		{"offset without colon", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T08:00:00+0100"), "not of the form"},
		{"no offset", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T08:00:00"), "not of the form"},
		{"one-digit hour", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T8:00:00Z"), "not of the form"},
		{"comma before the fraction", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T08:00:00,5Z"), "not of the form"},
		{"space for T", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20 08:00:00Z"), "not of the form"},
		{"ten fractional digits", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T08:00:00.0000000001Z"), "more than nine fractional digits"},
		{"day out of range", hs("kdelay-target", target, "kdelay-deliver-at", "2026-02-30T08:00:00Z"), "day out of range"},
		{"hour 24", hs("kdelay-target", target, "kdelay-deliver-at", "2026-11-20T24:00:00Z"), "hour out of range"},
		{"empty id", hs("kdelay-target", target, "kdelay-delay", "1s", "kdelay-id", ""), "kdelay-id is empty"},
		{"null id", []kdelay.Header{{Key: "kdelay-target", Value: []byte(target)}, {Key: "kdelay-delay", Value: []byte("1s")}, {Key: "kdelay-id"}}, "kdelay-id is empty"},
		{"target twice", hs("kdelay-target", target, "kdelay-target", "x", "kdelay-delay", "1s"), "kdelay-target appears 2 times"},
		{"id twice", hs("kdelay-target", target, "kdelay-delay", "1s", "kdelay-id", "a", "kdelay-id", "a"), "kdelay-id appears 2 times"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt, _, err := kdelay.Parse(ts, c.headers, rules)
			if err == nil {
				t.Fatalf("Parse accepted it (due %s), want an error containing %q", rt.Due.UTC(), c.reason)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("Parse: %q, want it to contain %q", err, c.reason)
			}
		})
	}
}

func date(y int, m time.Month, d, h, min, s, ns int) time.Time {
	return time.Date(y, m, d, h, min, s, ns, time.UTC)
}

// TestParseKeepsUserHeaders checks what travels with a record: every header
// but the routing ones, in order, duplicates included.
func TestParseKeepsUserHeaders(t *testing.T) {
	t.Parallel()
	in := hs("a", "1", "kdelay-target", "orders", "b", "2", "kdelay-delay", "1s", "a", "3", "kdelay-error", "x")
	_, user, err := kdelay.Parse(ts, in, kdelay.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	want := hs("a", "1", "b", "2", "a", "3", "kdelay-error", "x")
	if len(user) != len(want) {
		t.Fatalf("user headers %v, want %v", user, want)
	}
	for i := range want {
		if user[i].Key != want[i].Key || string(user[i].Value) != string(want[i].Value) {
			t.Errorf("user header %d = %s=%s, want %s=%s", i, user[i].Key, user[i].Value, want[i].Key, want[i].Value)
		}
	}
}

// TestRoundTrip checks that what kdelay writes on a hop parses back to the
// same route, so the due time stays absolute across any number of hops.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 11, 24, 8, 0, 0, 1, time.UTC) // not on a millisecond
	hop := kdelay.AppendHop(hs("user", "u"), "orders", "id-1", due)
	rt, user, err := kdelay.Parse(ts, hop, kdelay.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	if want := kdelay.CeilMillis(due); !rt.Due.Equal(want) || rt.Target != "orders" || rt.ID != "id-1" {
		t.Errorf("route %+v, want target orders, id id-1, due %s", rt, want)
	}
	if len(user) != 1 || user[0].Key != "user" {
		t.Errorf("user headers %v, want only user=u", user)
	}
	if got := kdelay.FormatDeliverAt(due); got != "1795507200001" {
		t.Errorf("FormatDeliverAt(%s) = %s, want 1795507200001 (rounded up)", due, got)
	}
	if got := kdelay.FormatDelay(1500 * time.Microsecond); got != "2" {
		t.Errorf("FormatDelay(1.5ms) = %s, want 2 (rounded up)", got)
	}
}

// TestOwns is not parallel: testing.AllocsPerRun refuses to run in a
// parallel test.
func TestOwns(t *testing.T) {
	for _, c := range []struct {
		prefix, name string
		own          bool
	}{
		{"", "kdelay.ingress", true}, {"", "kdelay.dlq", true}, {"", "kdelay.level.1s", true}, {"", "kdelay.level.3d", true},
		{"", "kdelay.control", true}, {"", "kdelay.controls", false}, {"pay", "pay.control", true},
		{"", "kdelay.levels", false}, {"", "kdelay.ingress2", false}, {"", "kdelay", false}, {"", "kdelayx.dlq", false},
		{"", "orders", false}, {"pay", "pay.dlq", true}, {"pay", "kdelay.dlq", false}, {"pay", "payments.dlq", false},
	} {
		if got := (kdelay.Topics{Prefix: c.prefix}).Owns(c.name); got != c.own {
			t.Errorf("Topics{Prefix: %q}.Owns(%q) = %t, want %t", c.prefix, c.name, got, c.own)
		}
	}
	if n := testing.AllocsPerRun(100, func() { kdelay.Topics{}.Owns("kdelay.level.1s") }); n != 0 {
		t.Errorf("Owns allocates %v times per call; Parse calls it for every record", n)
	}
}

// TestHopAllocations checks the forwarder's per-record path, Parse then
// AppendHop, for the allocations it saves: the routing headers fit after the
// user's without copying them, and kdelay-id and kdelay-deliver-at share one
// buffer. Not parallel, as TestOwns.
func TestHopAllocations(t *testing.T) {
	due := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	in := kdelay.AppendHop(hs("user", "u"), "orders", "id-1", due)
	n := testing.AllocsPerRun(100, func() {
		rt, user, err := kdelay.Parse(ts, in, kdelay.Rules{})
		if err != nil {
			t.Fatal(err)
		}
		_ = kdelay.AppendHop(user, rt.Target, rt.ID, rt.Due)
	})
	// Parse: the user headers and three strings (target, deliver-at, id);
	// AppendHop: the id and deliver-at values, the target's value.
	if n > 6 {
		t.Errorf("Parse then AppendHop allocates %v times; want at most 6: the forwarder does it for every record", n)
	}
	// The room Parse leaves is what AppendHop adds and no more: sized for
	// the routing headers too, the slice was most of the bytes a record
	// costs to route.
	if _, user, _ := kdelay.Parse(ts, in, kdelay.Rules{}); cap(user)-len(user) != 3 {
		t.Errorf("Parse leaves room for %d headers after the user's %d, want 3, what AppendHop adds", cap(user)-len(user), len(user))
	}
	out := kdelay.AppendHop(hs("user", "u"), "orders", "id-1", due)
	id := out[1].Value
	_ = append(id, 'x') // must not write into kdelay-deliver-at
	if got := string(out[2].Value); got != kdelay.FormatDeliverAt(due) {
		t.Errorf("kdelay-deliver-at = %s after appending to kdelay-id's value, want %s", got, kdelay.FormatDeliverAt(due))
	}
}

// TestSource checks the place a record is named by, topic/partition/offset:
// it is the id of a record that came without one and the kdelay-source of a
// dead letter, which dlq replay and mark matching read back.
func TestSource(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		topic     string
		partition int32
		offset    int64
		want      string
	}{
		{"kdelay.ingress", 0, 0, "kdelay.ingress/0/0"},
		{"kdelay.level.2h", 17, 123456789, "kdelay.level.2h/17/123456789"},
		{"t", math.MaxInt32, math.MaxInt64, "t/2147483647/9223372036854775807"},
		{"t", -1, -1, "t/-1/-1"},
	} {
		if got := kdelay.Source(tt.topic, tt.partition, tt.offset); got != tt.want {
			t.Errorf("Source(%q, %d, %d) = %q, want %q", tt.topic, tt.partition, tt.offset, got, tt.want)
		}
	}
}
