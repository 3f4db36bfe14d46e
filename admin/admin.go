// Package admin serves what an operator of kdelay watches over HTTP:
// Prometheus metrics on /metrics, the health checks an orchestrator asks,
// /livez (the process runs) and /readyz (it forwards: connected to Kafka and
// given its partitions), and the Go runtime's profiles on /debug/pprof/ to
// loopback only.
//
// Metrics is the forwarder.Observer that counts what the forwarders do; give
// it to forwarder.Config.Observer, then give the Forwarder and the same
// Metrics to New:
//
//	m := admin.NewMetrics()
//	f, _ := forwarder.New(forwarder.Config{Brokers: brokers, Observer: m})
//	srv, _ := admin.New(admin.Config{Forwarder: f, Metrics: m, Brokers: brokers})
//	go srv.Run(ctx)
//	f.Run(ctx)
//
// Tracing, apart, makes OpenTelemetry spans of every record the forwarder
// receives and publishes: give its ClientOpts to forwarder.Config.ClientOpts.
package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/schedule"
)

// DefaultAddr is where the admin listener listens by default: loopback, so
// that nothing is exposed until the operator says where; a Prometheus or a
// kubelet on another host needs it set to an address it reaches, such as
// :9464. 9464 is the port Prometheus's registry of exporter ports gives
// OpenTelemetry's Prometheus exporter, the usual one for an application.
const DefaultAddr = "127.0.0.1:9464"

// Timeouts of the requests to Kafka the listener makes. readyTimeout is below
// a kubelet's default probe timeout of 1s, so that /readyz answers 503 rather
// than not at all; a scrape may take longer (Prometheus allows 10s).
const (
	readyTimeout    = 800 * time.Millisecond
	scrapeTimeout   = 5 * time.Second
	shutdownTimeout = 5 * time.Second
)

// Forwarder is what the listener reads of a *forwarder.Forwarder.
type Forwarder interface {
	Ready() <-chan struct{}
	Waiting() string
	Levels() []forwarder.LevelState
	Commands() forwarder.CommandStats
	RecordBudget() int64
}

// Scheduler is what the listener reads of a *schedule.Scheduler.
type Scheduler interface {
	Stats() schedule.Stats
}

// Config configures a Server.
type Config struct {
	// Addr is the host:port to listen on; port 0 picks a free one (see
	// Server.Addr). Default DefaultAddr, 127.0.0.1:9464.
	Addr string

	// Forwarder is the forwarder to report on. Required.
	Forwarder Forwarder

	// Scheduler, when set, is the scheduler of recurring schedules running
	// beside the forwarder: its figures are metrics too (kdelay_schedules,
	// kdelay_schedule_*). Default none.
	Scheduler Scheduler

	// Metrics is the Observer given to the forwarder's Config; New adds
	// the gauges it reads to its registry, so one Metrics serves one
	// Server. Required.
	Metrics *Metrics

	// Brokers are the seed brokers, asked for the records pending in each
	// level and by /readyz. Required.
	Brokers []string

	// ClientOpts are added to the Kafka client the listener makes: the
	// forwarder's TLS and SASL.
	ClientOpts []kgo.Opt

	// Client, when set, is the Kafka client the listener asks with instead
	// of one of its own: the process's client outside any group
	// (forwarder.NewPlainClient). Run does not close it. Brokers and
	// ClientOpts are then not used.
	Client *kgo.Client

	// Console, when set, is served at / and everything below it the
	// other paths do not take: the web console (package console). Default
	// none: / answers 404.
	Console http.Handler

	// Logger receives the listener's logs. Default: discard.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Forwarder == nil {
		errs = append(errs, errors.New("admin: no Forwarder; pass the *forwarder.Forwarder to report on"))
	}
	if c.Metrics == nil {
		errs = append(errs, errors.New("admin: no Metrics; make one with admin.NewMetrics and give it to forwarder.Config.Observer too"))
	}
	if len(c.Brokers) == 0 && c.Client == nil {
		errs = append(errs, errors.New("admin: no Brokers; pass the forwarder's seed brokers"))
	}
	return errors.Join(errs...)
}

// Server is the admin HTTP listener.
type Server struct {
	cfg  Config
	ln   net.Listener
	http *http.Server
	cl   *kgo.Client
	adm  *kadm.Client
	// closeClient closes cl if the listener made it.
	closeClient func()
}

// New checks cfg and listens on its address, so that an address in use is
// reported before anything else starts. Nothing is served until Run, which
// must be called: it closes the listener when it returns.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cl, closeClient := cfg.Client, func() {}
	if cl == nil {
		var err error
		cl, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.ClientID("kdelay-admin")}, cfg.ClientOpts...)...)
		if err != nil {
			return nil, fmt.Errorf("admin: kafka client: %w", err)
		}
		closeClient = cl.Close
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		closeClient()
		return nil, fmt.Errorf("admin: listen on %s: %w; free the port, set admin to another host:port, or to empty to turn the listener off", cfg.Addr, err)
	}
	s := &Server{cfg: cfg, ln: ln, cl: cl, adm: kadm.NewClient(cl), closeClient: closeClient}
	cfg.Metrics.reg.MustRegister(&gauges{s: s})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Metrics.reg, promhttp.HandlerOpts{ErrorLog: promLog{cfg.Logger}, ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /livez", s.livez)
	mux.HandleFunc("GET /readyz", s.readyz)
	profiles(mux)
	if cfg.Console != nil {
		mux.Handle("/", cfg.Console)
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return s, nil
}

// Addr is the address listened on: Config.Addr with its port resolved.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx ends. Shutdown goes in this order: stop accepting,
// let the requests in flight finish (for up to 5s, then cut them), then close the Kafka
// client they use. ctx ending is not an error.
func (s *Server) Run(ctx context.Context) error {
	defer s.closeClient()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := s.http.Serve(s.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("admin: serve on %s: %w", s.Addr(), err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		err := s.http.Shutdown(sctx)
		if errors.Is(err, context.DeadlineExceeded) {
			// A request may run as long as it asks: a CPU profile of 30 s,
			// a trace. Cut it, rather than fail a clean stop of kdelay
			// serve (it exited 1 with "context deadline exceeded").
			s.cfg.Logger.Warn("admin_requests_cut", "after", shutdownTimeout)
			s.http.Close() // only the listener's error, closed already
			return nil
		}
		return err
	})
	s.cfg.Logger.Info("admin_listening", "addr", s.Addr(), "metrics", "/metrics", "liveness", "/livez", "readiness", "/readyz", "profiles", "/debug/pprof/")
	return g.Wait()
}

// promLog hands promhttp's errors (a metric that failed to collect) to slog.
type promLog struct{ log *slog.Logger }

func (l promLog) Println(v ...any) { l.log.Warn("metrics_failed", "err", fmt.Sprint(v...)) }
