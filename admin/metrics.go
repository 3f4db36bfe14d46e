package admin

import (
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/kdelay/kdelay/forwarder"
)

// Namespace prefixes every metric of kdelay's own and of its Kafka clients.
const Namespace = "kdelay"

// LatenessBuckets are the upper bounds, in seconds, of the buckets of
// kdelay_delivery_lateness_seconds: fine around kdelay's own lateness (a
// few milliseconds, docs/BENCHMARKS.md) and poll mode's tick (100ms), coarse
// up to the minutes a broker outage adds.
var LatenessBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Metrics is a forwarder.Observer that counts, per level, what the forwarders
// do, in a Prometheus registry of its own, which Server serves on /metrics
// with the gauges it reads from the forwarder. Its labels are bounded by the
// configuration: level (the level's name, or "ingress") and, for the Kafka
// client metrics, node_id. Never a topic or a record's id, which grow with
// the data.
//
// One Metrics serves one Forwarder: the Kafka client metrics of a level are
// registered once.
type Metrics struct {
	reg      *prometheus.Registry
	lateness *prometheus.HistogramVec
	outcomes [forwarder.OutcomeCount]*prometheus.CounterVec // by forwarder.Outcome
}

// NewMetrics returns a Metrics with a new registry, which also holds the Go
// runtime's and the process's metrics (go_*, process_*).
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	// go_gc_heap_live_bytes too: the heap the last collection found live,
	// which, unlike go_memstats_heap_inuse_bytes, does not saw up and down
	// with each cycle, so a leak shows in it first (kdelay bench soak); and
	// go_gc_gomemlimit_bytes, the soft limit serve set (memory_limit.go).
	liveHeap := collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/(heap/live|gomemlimit):bytes$`)}
	m.reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(liveHeap)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.lateness = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace,
		Name:      "delivery_lateness_seconds",
		Help:      "How late records reached their target: the broker's acknowledgement of the delivery minus the record's kdelay-deliver-at, by the level that delivered it.",
		Buckets:   LatenessBuckets,
	}, []string{"level"})
	m.reg.MustRegister(m.lateness)
	help := map[forwarder.Outcome]string{
		forwarder.Delivered:    "Records their target acknowledged, once each, by the level that handed them on.",
		forwarder.Hopped:       "Records produced to the next level topic, by the level they left.",
		forwarder.Held:         "Records with a remainder below the smallest level, held in memory until due.",
		forwarder.DeadLettered: "Records sent to the dead-letter topic, by the level that gave up on them.",
		forwarder.Retried:      "Produces that failed with an error worth retrying and are tried again.",
		forwarder.Cancelled:    "Records not delivered because a cancel command names their id, by the level that dropped them.",
		forwarder.PastDue:      "Records written to the ingress already past their due time (kdelay-deliver-at before the record's timestamp), delivered at once: a producer's lateness, which kdelay_delivery_lateness_seconds leaves out by counting theirs from when they were written.",
		forwarder.HandedBack:   "Records held in memory until due, written back to the ingress when their partition moved to another process or this one stopped, by the level that held them: the ingress's next owner holds them instead.",
	}
	for _, o := range forwarder.Outcomes() {
		m.outcomes[o] = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: o.String() + "_total", Help: help[o],
		}, []string{"level"})
		m.reg.MustRegister(m.outcomes[o])
	}
	return m
}

// Registry is where the metrics are, for a program that serves them itself
// or adds its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Level makes the counters of one forwarder; it implements forwarder.Observer.
func (m *Metrics) Level(name string) forwarder.LevelObserver {
	l := &level{
		lateness: m.lateness.WithLabelValues(name),
		client: kprom.NewMetrics(Namespace,
			kprom.Registry(m.reg),
			kprom.WithStaticLabel(prometheus.Labels{"level": name}),
			// No topic label: a forwarder produces to every target topic.
			kprom.FetchAndProduceDetail(kprom.ByNode, kprom.Records, kprom.UncompressedBytes),
		),
	}
	for _, o := range forwarder.Outcomes() {
		l.outcomes[o] = m.outcomes[o].WithLabelValues(name)
	}
	return l
}

// ClientOpts are the hooks of the one client every level shares in
// at-least-once delivery: kprom's metrics, labelled level="all". It makes
// Metrics a forwarder.ClientObserver.
func (m *Metrics) ClientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.WithHooks(kprom.NewMetrics(Namespace,
		kprom.Registry(m.reg),
		kprom.WithStaticLabel(prometheus.Labels{"level": AllLevels}),
		kprom.FetchAndProduceDetail(kprom.ByNode, kprom.Records, kprom.UncompressedBytes),
	))}
}

// AllLevels is the level label of the metrics of a client every level
// shares.
const AllLevels = "all"

// level is one forwarder's metrics, resolved once so that counting a record
// is an atomic add: no label lookup, no allocation.
type level struct {
	lateness prometheus.Observer
	outcomes [forwarder.OutcomeCount]prometheus.Counter
	client   *kprom.Metrics
}

func (l *level) Handled(o forwarder.Outcome) { l.outcomes[o].Inc() }

// Delivered counts an early record as 0 late, as the benchmark does, so
// that the buckets stay about lateness; kdelay never delivers early.
func (l *level) Delivered(late time.Duration) { l.lateness.Observe(max(late, 0).Seconds()) }

func (l *level) ClientOpts() []kgo.Opt { return []kgo.Opt{kgo.WithHooks(l.client)} }
