package forwarder

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestDeadLetters sends every kind of bad record through the ingress and
// checks each reaches the DLQ with its original key, value and headers, a
// reason that says what to fix, and where it came from; and that the good
// record sent after them is still delivered.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	tooBig := fx.target + ".small"
	fx.cluster.CreateTopic(tooBig, 1, map[string]*string{"max.message.bytes": ptr("2000")})
	fx.start(fx.cfg)

	cases := []struct {
		name    string
		value   string
		headers []string
		reason  string
	}{
		{"missing target", "a", []string{kdelay.HeaderDelay, "1s"}, "kdelay-target is missing"},
		{"empty target", "b", []string{kdelay.HeaderTarget, "", kdelay.HeaderDelay, "1s"}, "kdelay-target is missing"},
		{"target is kdelay's own topic", "c", []string{kdelay.HeaderTarget, fx.cfg.Topics.Ingress(), kdelay.HeaderDelay, "1s"}, "kdelay's own topic"},
		{"both delay headers", "d", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "1s", kdelay.HeaderDeliverAt, "1795000000000"}, "set exactly one"},
		{"neither delay header", "e", []string{kdelay.HeaderTarget, fx.target}, "neither kdelay-delay nor kdelay-deliver-at"},
		{"unparsable delay", "f", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "soon"}, `"soon" is neither integer milliseconds nor a Go duration`},
		{"unparsable time", "g", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDeliverAt, "tomorrow 8am"}, "neither unix epoch milliseconds nor RFC 3339"},
		{"negative delay", "h", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "-5s"}, "is negative"},
		{"delay overflows", "i", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "99999999999999999999"}, "overflows"},
		{"time overflows", "j", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDeliverAt, "99999999999999999999"}, "overflows"},
		{"delay above max-delay", "k", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "9601h"}, "more than the maximum delay"},
		{"time above max-delay", "l", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderDeliverAt, "2999-01-01T00:00:00Z"}, "more than the maximum delay"},
		{"header twice", "m", []string{kdelay.HeaderTarget, fx.target, kdelay.HeaderTarget, "x", kdelay.HeaderDelay, "1s"}, "appears 2 times"},
		{"target does not exist", "n", []string{kdelay.HeaderTarget, fx.target + ".missing", kdelay.HeaderDelay, "0"}, "does not exist"},
		{"target name invalid", "o", []string{kdelay.HeaderTarget, "no spaces allowed", kdelay.HeaderDelay, "0"}, "not a valid topic name"},
		{"target name too long", "q", []string{kdelay.HeaderTarget, strings.Repeat("t", 250), kdelay.HeaderDelay, "0"}, "not a valid topic name"},
		{"too large for target", incompressible(5000), []string{kdelay.HeaderTarget, tooBig, kdelay.HeaderDelay, "1200"}, "larger than topic"},
	}
	sent := map[string]string{} // value → source
	for _, c := range cases {
		r := fx.send(c.value, append([]string{"user", c.name}, c.headers...)...)
		sent[c.value] = fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)
	}
	fx.send("good", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "1500")

	dead := fx.cluster.Collect(fx.cfg.Topics.DLQ()).Until(60*time.Second, atLeast(len(cases)))
	byValue := map[string]kafkatest.Arrival{}
	for _, a := range dead {
		byValue[string(a.Value)] = a
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, ok := byValue[c.value]
			if !ok {
				t.Fatalf("not in the DLQ (%d records there)", len(dead))
			}
			reason, _ := kafkatest.Header(a.Record, kdelay.HeaderError)
			if !strings.Contains(reason, c.reason) {
				t.Errorf("%s = %q, want it to contain %q", kdelay.HeaderError, reason, c.reason)
			}
			src, _ := kafkatest.Header(a.Record, kdelay.HeaderSource)
			want := append([]string{"user", c.name}, c.headers...)
			if c.name == "too large for target" {
				// Refused at delivery, after a hop: it comes from the level
				// topic as it was there, still carrying its id, due time and
				// target, so it can be replayed to the ingress as is.
				if !strings.HasPrefix(src, fx.cfg.Topics.Level("1s")+"/") {
					t.Errorf("%s = %q, want a place in %s", kdelay.HeaderSource, src, fx.cfg.Topics.Level("1s"))
				}
				id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
				if id != sent[c.value] {
					t.Errorf("%s = %q, want the ingress place %q", kdelay.HeaderID, id, sent[c.value])
				}
				want = []string{"user", c.name, kdelay.HeaderID, id}
			} else if src != sent[c.value] {
				t.Errorf("%s = %q, want %q", kdelay.HeaderSource, src, sent[c.value])
			}
			// The record's headers come first, unchanged and in order.
			for i := 0; i < len(want); i += 2 {
				h := a.Headers[i/2]
				if h.Key != want[i] || string(h.Value) != want[i+1] {
					t.Errorf("header %d = %s=%s, want %s=%s", i/2, h.Key, h.Value, want[i], want[i+1])
				}
			}
		})
	}
	if got := fx.cluster.Collect(fx.target).Until(30*time.Second, atLeast(1)); len(got) != 1 || string(got[0].Value) != "good" {
		t.Errorf("target has %d records after the bad ones, want the good one: a bad record blocked the partition", len(got))
	}
}

// incompressible returns n random letters: brokers measure the compressed
// batch against max.message.bytes.
func incompressible(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(rand.IntN(26))
	}
	return string(b)
}
