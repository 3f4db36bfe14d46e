package admin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

// TestTracing runs a forwarder with Tracing's hooks on kfake and reads the
// spans it exported: a record written with a traceparent is received and
// published by every forwarder it passes in the producer's trace, each span
// the child of the one before, and reaches its target with a traceparent
// that its consumer continues.
func TestTracing(t *testing.T) {
	t.Parallel()
	const (
		traceID      = "4bf92f3577b34da6a3ce929d0e0e4736"
		producerSpan = "00f067aa0ba902b7"
	)
	tx := setupTracing(t)
	// 1.5s hops from the ingress into the 1s level, which delivers it.
	tx.send("traced", kdelay.HeaderTarget, tx.target, kdelay.HeaderDelay, "1500ms",
		"traceparent", "00-"+traceID+"-"+producerSpan+"-01", "tracestate", "rojo=00f067aa0ba902b7")
	tx.send("untraced", kdelay.HeaderTarget, tx.target, kdelay.HeaderDelay, "0s")
	got := tx.cluster.Collect(tx.target).Until(20*time.Second, func(a []kafkatest.Arrival) bool { return len(a) >= 2 })
	if len(got) != 2 {
		t.Fatalf("%d records reached the target, want 2", len(got))
	}
	delivered := map[string]*kgo.Record{}
	for _, a := range got {
		delivered[string(a.Record.Value)] = a.Record
	}
	spans := tx.stop()
	ingress, level := tx.topics.Ingress(), tx.topics.Level("1s")

	t.Run("every hop of a traced record is a span of the producer's trace, child of the one before", func(t *testing.T) {
		parent := producerSpan
		for _, name := range []string{ingress + " receive", level + " publish", level + " receive", tx.target + " publish"} {
			s, ok := find(spans, name, traceID)
			if !ok {
				t.Fatalf("no span %q in trace %s; spans exported:\n%s", name, traceID, list(spans))
			}
			if got := s.Parent().SpanID().String(); got != parent {
				t.Errorf("span %q has parent %s, want %s", name, got, parent)
			}
			wantKind := trace.SpanKindConsumer
			if strings.HasSuffix(name, " publish") {
				wantKind = trace.SpanKindProducer
			}
			if s.SpanKind() != wantKind {
				t.Errorf("span %q is a %s span, want %s", name, s.SpanKind(), wantKind)
			}
			parent = s.SpanContext().SpanID().String()
		}
	})
	t.Run("the target's consumer continues the trace from kdelay's publish", func(t *testing.T) {
		pub, ok := find(spans, tx.target+" publish", traceID)
		if !ok {
			t.Fatalf("no span %q in trace %s", tx.target+" publish", traceID)
		}
		want := "00-" + traceID + "-" + pub.SpanContext().SpanID().String() + "-01"
		if tp, _ := kafkatest.Header(delivered["traced"], "traceparent"); tp != want {
			t.Errorf("traceparent on the target = %q, want %q: the producer's trace, parented by kdelay's publish", tp, want)
		}
		if ts, _ := kafkatest.Header(delivered["traced"], "tracestate"); ts != "rojo=00f067aa0ba902b7" {
			t.Errorf("tracestate on the target = %q, want the producer's rojo=00f067aa0ba902b7", ts)
		}
	})
	t.Run("a record without traceparent starts a trace that reaches its target", func(t *testing.T) {
		tp, ok := kafkatest.Header(delivered["untraced"], "traceparent")
		parts := strings.Split(tp, "-")
		if !ok || len(parts) != 4 {
			t.Fatalf("traceparent on the target = %q (present %v), want one kdelay made", tp, ok)
		}
		if _, ok := find(spans, ingress+" receive", parts[1]); !ok {
			t.Errorf("the trace %s on the target has no span %q", parts[1], ingress+" receive")
		}
	})
	t.Run("spans say which service and topic, never the key", func(t *testing.T) {
		for _, s := range spans {
			if v, _ := s.Resource().Set().Value("service.name"); v.AsString() != ServiceName {
				t.Errorf("span %q has service.name %q, want %q", s.Name(), v.AsString(), ServiceName)
			}
			for _, kv := range s.Attributes() {
				if kv.Key == "messaging.kafka.message.key" {
					t.Errorf("span %q has the record's key %q", s.Name(), kv.Value.AsString())
				}
			}
		}
	})
}

// tracingFixture is a forwarder on kfake with Tracing's hooks, exporting to
// spans.
type tracingFixture struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	topics  kdelay.Topics
	target  string
	cl      *kgo.Client
	tr      *Tracing
	spans   *spanSink
	stop    func() []sdktrace.ReadOnlySpan
}

func setupTracing(t *testing.T) *tracingFixture {
	t.Helper()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	set, err := levels.Parse([]string{"1s", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	sink := &spanSink{}
	tr, err := NewTracing(context.Background(), TracingConfig{Exporter: sink})
	if err != nil {
		t.Fatalf("NewTracing: %v", err)
	}
	topics := kdelay.Topics{Prefix: name}
	f, err := forwarder.New(forwarder.Config{
		Brokers: cluster.Brokers, Topics: topics, Levels: set, Group: name,
		Partitions: 1, ShutdownTimeout: 2 * time.Second, ClientOpts: tr.ClientOpts(),
	})
	if err != nil {
		t.Fatalf("forwarder.New: %v", err)
	}
	tx := &tracingFixture{t: t, cluster: cluster, topics: topics, target: name + ".target", tr: tr, spans: sink,
		cl: cluster.Client(kgo.ProducerLinger(0))}
	cluster.CreateTopic(tx.target, 1, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	// stop stops the forwarder, then sends the last spans: spans end when
	// the broker acknowledges a record, so all have ended once Run returns.
	tx.stop = sync.OnceValue(func() []sdktrace.ReadOnlySpan {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("forwarder Run: %v", err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		if err := tr.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		return sink.all()
	})
	t.Cleanup(func() { tx.stop() })
	select {
	case <-f.Ready():
	case err := <-done:
		t.Fatalf("forwarder stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("forwarder not ready after 30s")
	}
	return tx
}

// send writes a record with value and headers, given as name, value pairs,
// to the ingress.
func (tx *tracingFixture) send(value string, headers ...string) {
	tx.t.Helper()
	r := &kgo.Record{Topic: tx.topics.Ingress(), Key: []byte("key-" + value), Value: []byte(value)}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
	}
	if err := tx.cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		tx.t.Fatalf("produce %s: %v", value, err)
	}
}

// spanSink is an in-process collector: it keeps every span exported to it,
// through Shutdown, unlike tracetest.InMemoryExporter, which forgets them.
type spanSink struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (s *spanSink) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spans = append(s.spans, spans...)
	return nil
}

func (s *spanSink) Shutdown(context.Context) error { return nil }

func (s *spanSink) all() []sdktrace.ReadOnlySpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sdktrace.ReadOnlySpan(nil), s.spans...)
}

// find is the span called name in the trace traceID.
func find(spans []sdktrace.ReadOnlySpan, name, traceID string) (sdktrace.ReadOnlySpan, bool) {
	for _, s := range spans {
		if s.Name() == name && s.SpanContext().TraceID().String() == traceID {
			return s, true
		}
	}
	return nil, false
}

// list writes spans one a line, for a failure message.
func list(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s trace=%s span=%s parent=%s\n", s.Name(), s.SpanContext().TraceID(), s.SpanContext().SpanID(), s.Parent().SpanID())
	}
	return b.String()
}

func TestTracesURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ endpoint, want, err string }{
		{"http://otel-collector:4318", "http://otel-collector:4318/v1/traces", ""},
		{"http://otel-collector:4318/", "http://otel-collector:4318/v1/traces", ""},
		{"https://traces.example.com/otlp/v1/traces", "https://traces.example.com/otlp/v1/traces", ""},
		{"otel-collector:4318", "", "is not an http or https URL"},
		{"grpc://otel-collector:4317", "", "is not an http or https URL"},
		{"http://", "", "is not an http or https URL"},
		{"https://alice:s3cret@traces.example.com", "", "OTEL_EXPORTER_OTLP_HEADERS"},
		{"https://traces.example.com/v1/traces?api_key=s3cret", "", "OTEL_EXPORTER_OTLP_HEADERS"},
	} {
		t.Run(tt.endpoint, func(t *testing.T) {
			t.Parallel()
			got, err := TracesURL(tt.endpoint)
			switch {
			case tt.err == "" && (err != nil || got != tt.want):
				t.Errorf("TracesURL(%q) = %q, %v; want %q", tt.endpoint, got, err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("TracesURL(%q) = %q, %v; want an error saying %q", tt.endpoint, got, err, tt.err)
			case err != nil && strings.Contains(err.Error(), "s3cret"):
				t.Errorf("TracesURL(%q) error %q repeats the secret", tt.endpoint, err)
			}
		})
	}
}
