package main

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestServeTracing runs serve with tracing on and off against an OTLP/HTTP
// collector of the test's own, and sends a record with a W3C traceparent.
func TestServeTracing(t *testing.T) {
	t.Parallel()
	const (
		traceID      = "4bf92f3577b34da6a3ce929d0e0e4736"
		producerSpan = "00f067aa0ba902b7"
		traceparent  = "00-" + traceID + "-" + producerSpan + "-01"
	)
	// send writes a record due in 1.5s, which hops through the 1s level,
	// and returns it as it reached the target.
	send := func(t *testing.T, e *e2e, s *process) kafkatest.Arrival {
		t.Helper()
		produce(t, s.brokers, e.topics().Ingress(), []sent{{value: "traced", key: "k", headers: []string{
			"traceparent=" + traceparent, kdelay.HeaderTarget + "=" + e.target, kdelay.HeaderDelay + "=1500ms"}}})
		got := s.collect(t, e.target).Until(20*time.Second, func(a []kafkatest.Arrival) bool { return len(a) > 0 })
		if len(got) != 1 {
			t.Fatalf("%d records reached the target, want 1", len(got))
		}
		return got[0]
	}

	t.Run("on, the collector gets the spans of the ingress and the target in the producer's trace", func(t *testing.T) {
		t.Parallel()
		col := newCollector(t)
		e := setup(t)
		// OTEL_BSP_SCHEDULE_DELAY: a standard variable kdelay's exporter
		// reads, here to send spans every 100ms rather than 5s.
		e.env = []string{"KDELAY_TRACING=true", "KDELAY_TRACING_ENDPOINT=" + col.url, "OTEL_BSP_SCHEDULE_DELAY=100"}
		s := e.serve()
		delivered := send(t, e, s)
		ingress, publish := e.topics().Ingress()+" receive", e.target+" publish"
		if !eventually(20*time.Second, func() bool { return col.has(traceID, ingress) && col.has(traceID, publish) }) {
			t.Fatalf("the collector has no span %q or %q in trace %s after 20s; it has %v", ingress, publish, traceID, col.names())
		}
		if got := col.span(traceID, ingress).parent; got != producerSpan {
			t.Errorf("span %q has parent %s, want the producer's span %s", ingress, got, producerSpan)
		}
		want := "00-" + traceID + "-" + col.span(traceID, publish).id + "-01"
		if got := headerOf(delivered.Record, "traceparent"); got != want {
			t.Errorf("traceparent on the target = %q, want %q: the producer's trace, parented by kdelay's publish", got, want)
		}
		if got := col.span(traceID, ingress).service; got != "kdelay" {
			t.Errorf("service.name of the spans = %q, want kdelay", got)
		}
		if code, _ := s.stop(t); code != 0 {
			t.Errorf("serve exited with %d, want 0", code)
		}
	})
	t.Run("off, nothing is exported and traceparent arrives as written", func(t *testing.T) {
		t.Parallel()
		col := newCollector(t)
		e := setup(t)
		// Where an exporter would send, if one were made.
		e.env = []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.url, "OTEL_BSP_SCHEDULE_DELAY=100"}
		s := e.serve()
		delivered := send(t, e, s)
		if got := headerOf(delivered.Record, "traceparent"); got != traceparent {
			t.Errorf("traceparent on the target = %q, want %q as produced", got, traceparent)
		}
		// A stop sends the last spans, if there are any to send.
		if code, _ := s.stop(t); code != 0 {
			t.Errorf("serve exited with %d, want 0", code)
		}
		if n := col.requests(); n != 0 {
			t.Errorf("the collector got %d requests from a serve with tracing off, want none", n)
		}
	})
}

// collector is an OTLP/HTTP traces endpoint that keeps the spans it is sent.
type collector struct {
	url   string
	mu    sync.Mutex
	spans []collected
	calls int
}

// collected is what the tests read of a span.
type collected struct {
	trace, id, parent, name, service string
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(c.export))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

func (c *collector) export(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if r.URL.Path != "/v1/traces" || err != nil {
		http.Error(w, "want an OTLP protobuf POST on /v1/traces", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans = append(c.spans, collected{trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
					parent: hex.EncodeToString(s.ParentSpanId), name: s.Name, service: service})
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
}

func (c *collector) span(trace, name string) collected {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.spans {
		if s.trace == trace && s.name == name {
			return s
		}
	}
	return collected{}
}

func (c *collector) has(trace, name string) bool { return c.span(trace, name).name != "" }

func (c *collector) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, s := range c.spans {
		names = append(names, s.name+" trace="+s.trace)
	}
	return names
}

func (c *collector) requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}
