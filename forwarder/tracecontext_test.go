package forwarder

import (
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// TestTraceContext checks that W3C trace context (traceparent, tracestate)
// reaches the target as the producer wrote it, through the ingress and
// every level, so a trace spans the delay: kdelay keeps every user header,
// and these two are what tracing libraries read.
func TestTraceContext(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	fx.start(fx.cfg)
	const (
		traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		tracestate  = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
	)
	// 3.4s: the ingress hops it into 2s, 2s into 1s, and 1s holds the
	// remaining 0.4s.
	fx.send("traced", "traceparent", traceparent, kdelay.HeaderTarget, fx.target, "tracestate", tracestate,
		kdelay.HeaderDelay, "3400ms", "baggage", "userId=alice")
	got := fx.cluster.Collect(fx.target).Until(20*time.Second, atLeast(1))
	if len(got) != 1 {
		t.Fatalf("got %d records on the target, want 1", len(got))
	}
	r := got[0].Record
	for name, want := range map[string]string{"traceparent": traceparent, "tracestate": tracestate, "baggage": "userId=alice"} {
		var values []string
		for _, h := range r.Headers {
			if h.Key == name {
				values = append(values, string(h.Value))
			}
		}
		if len(values) != 1 || values[0] != want {
			t.Errorf("%s on the target = %q, want exactly [%q] as produced", name, values, want)
		}
	}
	if n := len(r.Headers); n < 3 || r.Headers[0].Key != "traceparent" || r.Headers[1].Key != "tracestate" || r.Headers[2].Key != "baggage" {
		t.Errorf("headers on the target %v: want the user's first, in the order produced", r.Headers)
	}
}
