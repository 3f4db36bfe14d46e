package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// ServiceName is the service.name of kdelay's spans, unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES says otherwise.
const ServiceName = "kdelay"

// TracesPath is the path of the OTLP/HTTP traces endpoint, added to an
// endpoint given with none.
const TracesPath = "/v1/traces"

// TracingConfig configures Tracing.
type TracingConfig struct {
	// Endpoint is the URL of the OTLP/HTTP collector that receives the
	// spans, http or https, such as http://otel-collector:4318; TracesPath
	// is added when it has no path. Default: the standard variables
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, then OTEL_EXPORTER_OTLP_ENDPOINT,
	// then http://localhost:4318/v1/traces.
	Endpoint string

	// ServiceVersion is the service.version of the spans. Default: none.
	ServiceVersion string

	// Exporter receives the spans instead of an OTLP/HTTP exporter, for a
	// program that has its own (or a test). Default: OTLP/HTTP to Endpoint.
	Exporter sdktrace.SpanExporter

	// Logger receives the exports that failed. Default: discard.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c TracingConfig) WithDefaults() TracingConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c TracingConfig) validate() error {
	if c.Endpoint == "" {
		return nil
	}
	_, err := TracesURL(c.Endpoint)
	return err
}

// TracesURL is the traces endpoint of an OTLP/HTTP collector at endpoint:
// endpoint itself, or with TracesPath when it has no path. It refuses what
// the exporter would drop without a word, a user, a password or a query, and
// does not repeat endpoint in its error, since those may hold a secret:
// credentials go in OTEL_EXPORTER_OTLP_HEADERS.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return "", errors.New("is not an http or https URL with a host; write it as http://otel-collector:4318")
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("has a user, a password, a query or a fragment, which the OTLP exporter does not send; write scheme://host:port/path only, and put credentials in OTEL_EXPORTER_OTLP_HEADERS (e.g. Authorization=Bearer <token>)")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = TracesPath
	}
	return u.String(), nil
}

// Tracing makes OpenTelemetry spans of every record the Kafka clients it is
// given to consume and produce, through franz-go's kotel plugin, and exports
// them. Give ClientOpts to forwarder.Config.ClientOpts: every forwarder then
// makes, for each record, a "<topic> receive" span when it fetches it and a
// "<topic> publish" span when it hands it on (to a level, the target or the
// dead-letter topic), ended when the broker acknowledges it.
//
// A record's trace goes on through kdelay: the receive span is a child of
// the span in the record's W3C traceparent header, the publish span a child
// of the receive span, and the record is produced with a traceparent naming
// its publish span, so that the next level, then the target's consumer,
// continue the same trace. A record with no traceparent starts a trace.
// Spans name topics, partitions and offsets, never a key or a value.
//
// Spans are sent in batches in the background: a collector that is slow or
// down never delays a record; its spans are dropped once the batch queue is
// full, and each failed export is logged.
type Tracing struct {
	tp    *sdktrace.TracerProvider
	hooks []kgo.Hook
}

// NewTracing checks cfg and makes the exporter. Nothing is sent before a
// span ends; Shutdown must be called to send the last ones.
//
// The OTLP/HTTP exporter, the batch and the sampler read the standard
// OTEL_EXPORTER_OTLP_*, OTEL_BSP_* and OTEL_TRACES_SAMPLER* variables, the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. The default
// sampler records every trace that a producer's traceparent samples, and
// every record that comes without one.
func NewTracing(ctx context.Context, cfg TracingConfig) (*Tracing, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("tracing endpoint %w", err)
	}
	exp := cfg.Exporter
	if exp == nil {
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			u, _ := TracesURL(cfg.Endpoint) // checked by validate
			opts = append(opts, otlptracehttp.WithEndpointURL(u))
		}
		var err error
		if exp, err = otlptracehttp.New(ctx, opts...); err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w; check the OTEL_EXPORTER_OTLP_* variables", err)
		}
	}
	res, err := newResource(ctx, cfg.ServiceVersion)
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithBatcher(loggedExporter{SpanExporter: exp, log: cfg.Logger}))
	tracer := kotel.NewTracer(
		// Not the global provider and propagator: the process may hold
		// others, and the global propagator propagates nothing by default.
		kotel.TracerProvider(tp),
		kotel.TracerPropagator(propagation.TraceContext{}),
		// A key may be personal data, and kdelay cannot tell.
		kotel.KeyFormatter(func(*kgo.Record) (string, error) { return "", errNoKey }),
	)
	return &Tracing{tp: tp, hooks: kotel.NewKotel(kotel.WithTracer(tracer)).Hooks()}, nil
}

var errNoKey = errors.New("keys are not traced")

// newResource describes kdelay to the collector: service.name and
// service.version, which the standard variables override.
func newResource(ctx context.Context, version string) (*resource.Resource, error) {
	attrs := []resource.Option{resource.WithAttributes(semconv.ServiceName(ServiceName))}
	if version != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(version)))
	}
	// Later options win: the variables over kdelay's own.
	res, err := resource.New(ctx, append(attrs, resource.WithTelemetrySDK(), resource.WithFromEnv())...)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w; fix OTEL_RESOURCE_ATTRIBUTES (key=value,key=value)", err)
	}
	return res, nil
}

// ClientOpts install the tracing hooks on a Kafka client; the same ones serve
// every client.
func (t *Tracing) ClientOpts() []kgo.Opt { return []kgo.Opt{kgo.WithHooks(t.hooks...)} }

// Shutdown sends the spans not sent yet and stops the exporter, waiting at
// most until ctx ends. Call it once the clients are closed: spans that end
// later are dropped.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: send the last spans: %w", err)
	}
	return nil
}

// loggedExporter logs a failed export and reports it done: the batch
// processor would otherwise hand the error to OpenTelemetry's global
// handler, which prints it to stderr outside kdelay's log.
type loggedExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger
}

func (e loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.log.Warn("tracing_export_failed", "spans", len(spans), "err", err)
	}
	return nil
}
