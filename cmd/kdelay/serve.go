package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/console"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/schedule"
)

func newServe() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run kdelay: deliver records from the ingress topic to their targets when due",
		Long: `Run kdelay: deliver records written to <topic-prefix>.ingress to their kdelay-target
topic when due, never before.

With no --brokers, kdelay runs an embedded single-node Kafka broker on --listen and
keeps its data in --data-dir, so pending records survive a restart.

Every flag can also be set as a KDELAY_* environment variable (--check-interval is
KDELAY_CHECK_INTERVAL) or as a key in the YAML file named by --config
(check-interval: 100ms). Flags override the environment, which overrides the file.

SIGINT or SIGTERM stops kdelay cleanly: it finishes what is in flight, commits and
exits 0.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			return settingNamed(serve(cmd.Context(), cfg, cmd.ErrOrStderr()))
		},
	}
	cmd.Flags().SortFlags = false // in the order of docs/CONFIGURATION.md
	config.AddFlags(cmd.Flags())
	return cmd
}

// serve runs kdelay until ctx ends. Shutdown goes in this order: ctx ends,
// every forwarder stops fetching, waits for its in-flight produces, commits
// and leaves its group; then the last spans are sent, when tracing; then the
// embedded broker stops applying retention, closes and writes its state to
// data-dir. The broker closes last so that the forwarders can commit.
func serve(ctx context.Context, cfg config.Config, stderr io.Writer) error {
	log, kafkaLog, flush := newLoggers(cfg.LogLevel, cfg.LogFormat, stderr)
	defer flush() // first deferred, so run last: after the broker's last line
	cfg.InstanceID = cmp.Or(cfg.InstanceID, forwarder.DefaultInstanceID())
	// What this process runs with, secrets redacted: see config.LogValue.
	log.Info("starting", "version", version(), "config", cfg)
	// Read before anything starts: a file the console cannot use stops
	// serve at once, not once an embedded broker has started.
	credentials, err := readCredentials(cfg)
	if err != nil {
		return usageError{err}
	}
	s := server{cfg: cfg, log: log, kafkaLog: kafkaLog, stderr: stderr, credentials: credentials}
	s.memoryLimit = setMemoryLimit(cfg, os.Getenv("GOMEMLIMIT"), os.Getenv("GOGC"), log)
	if !cfg.Embedded() {
		// The forwarder retries what fails; a wrong password or CA fails
		// every time, so find it out now and say which key to fix.
		if err := probe(ctx, cfg); err != nil {
			return stopped(ctx, err)
		}
		return s.forward(ctx, cfg.Brokers)
	}
	// The embedded broker, restarted after a SIGKILL, aborts the
	// transactions left open without writing abort markers: producer ids
	// of this start keep what it commits next to them visible
	// (forwarder.Config.TransactionalIDSuffix). There is no predecessor
	// left to fence: it died with its broker.
	s.txnIDSuffix = "." + strconv.FormatInt(time.Now().UnixNano(), 36)
	b, err := startBroker(cfg, kafkaLog)
	if err != nil {
		return err
	}
	return s.forwardEmbedded(ctx, b)
}

// forwardEmbedded runs the forwarder on the embedded broker b, and b's
// retention beside it, then closes b.
func (s server) forwardEmbedded(ctx context.Context, b *embeddedBroker) error {
	retainCtx, stopRetention := context.WithCancel(ctx)
	retained := make(chan struct{})
	go func() {
		defer close(retained)
		_ = b.Run(retainCtx) // returns only when stopped
	}()
	err := s.forward(ctx, b.Addrs())
	stopRetention()
	<-retained
	b.Close()
	s.log.Info("embedded_broker_closed", "data_dir", s.cfg.DataDir)
	return err
}

// server is what one `kdelay serve` runs with.
type server struct {
	cfg           config.Config
	log, kafkaLog *slog.Logger
	stderr        io.Writer
	txnIDSuffix   string               // on the embedded broker: see serve
	credentials   []console.Credential // the console asks for, if any: console-auth-file
	memoryLimit   int64                // the soft memory limit setMemoryLimit set; 0 if not its own
}

// forward runs the forwarder on brokers, and the admin listener beside it,
// until ctx ends or either fails, and prints how to use kdelay once it is
// ready. Both stop together; the listener answers until the forwarder has
// stopped or for its own shutdown's 5s, whichever is shorter.
func (s server) forward(ctx context.Context, brokers []string) error {
	fcfg := s.forwarderConfig(brokers)
	flush, err := s.trace(ctx, &fcfg)
	if err != nil {
		return err
	}
	// Deferred, so after g.Wait: once the forwarders have stopped, every
	// span has ended.
	defer flush()
	// One client outside any group for the forwarder's start, the control
	// topic, the admin listener, the console and the scheduler's writes
	// outside the forwarders' transaction: a client each held a set of
	// connections each. The scheduler's reads go on the forwarders' client,
	// where they do not wait behind the control topic's long polls.
	plain, err := forwarder.NewPlainClient(fcfg,
		// The scheduler's progress and fences go to their own partitions.
		kgo.RecordPartitioner(schedule.Partitioner(kdelay.Topics{Prefix: s.cfg.TopicPrefix})),
		// A command or a step waits for its write: lingering only delays it.
		kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer plain.Close() // after g.Wait: the last of its users has stopped
	fcfg.Client = plain
	var metrics *admin.Metrics
	if s.cfg.Admin != "" {
		metrics = admin.NewMetrics()
		fcfg.Observer = metrics
	}
	sched, err := s.scheduler(brokers, plain)
	if err != nil {
		return usageError{err}
	}
	// max-buffered-bytes covers the scheduler's index too: the records
	// get what it leaves (forwarder/pool.go).
	fcfg.SharedBytes = sched.IndexBytes
	fcfg.Readers = []forwarder.Reader{sched.Reader()}
	f, err := forwarder.New(fcfg)
	if err != nil {
		return usageError{err}
	}
	g, gctx := errgroup.WithContext(ctx)
	if metrics != nil {
		console, err := s.adminConsole(brokers, metrics, plain)
		if err != nil {
			return err
		}
		srv, err := admin.New(admin.Config{Addr: s.cfg.Admin, Forwarder: f, Scheduler: sched, Metrics: metrics, Client: plain,
			Console: console, Logger: s.log})
		if err != nil {
			return adminFailed(err, s.cfg.Admin)
		}
		g.Go(func() error { return srv.Run(gctx) })
	}
	watch := &indexWatch{budget: cmp.Or(s.cfg.MaxBufferedBytes, forwarder.DefaultMaxBufferedBytes),
		index: sched.IndexBytes, records: f.RecordBudget, log: s.log, limit: s.memoryLimit}
	g.Go(func() error { watch.run(gctx); return nil })
	defer context.AfterFunc(ctx, func() { s.log.Info("shutting_down") })()
	done := make(chan struct{})
	g.Go(func() error {
		defer close(done)
		return f.Run(gctx)
	})
	select {
	case <-f.Ready():
		// It writes into the ingress, which the forwarder creates.
		g.Go(func() error { return sched.Run(gctx) })
		printHowTo(s.stderr, s.cfg, brokers)
	case <-done:
	}
	return stopped(ctx, g.Wait())
}

// tracingFlushTimeout bounds how long a stop waits for the collector to take
// the last spans: a collector that is down must not hold the exit.
const tracingFlushTimeout = 5 * time.Second

// adminFailed names the setting that frees the admin listener from an
// address in use: package admin names its Config field, not kdelay's flag,
// and the default 127.0.0.1:9464 is taken by a second serve on one machine.
func adminFailed(err error, addr string) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return err
	}
	return fmt.Errorf("admin: %s is already in use: pick a free host:port with --admin (or KDELAY_ADMIN), "+
		"or turn the listener off with --admin ''", addr)
}

// trace adds the tracing hooks to the forwarder's clients when tracing is
// on, and returns what sends the last spans once they are closed. With
// tracing off, no hook is installed and no exporter made: records pass as
// they came, traceparent included.
func (s server) trace(ctx context.Context, fcfg *forwarder.Config) (flush func(), err error) {
	if !s.cfg.Tracing {
		return func() {}, nil
	}
	tracing, err := admin.NewTracing(ctx, admin.TracingConfig{Endpoint: s.cfg.TracingEndpoint, ServiceVersion: version(), Logger: s.log})
	if err != nil {
		return nil, err
	}
	fcfg.ClientOpts = slices.Concat(fcfg.ClientOpts, tracing.ClientOpts())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := tracing.Shutdown(ctx); err != nil {
			s.log.Warn("tracing_flush_failed", "err", err)
		}
	}, nil
}

// settingNamed names the setting and flag that fix err, where the library
// that returned it named its Config field.
func settingNamed(err error) error {
	if errors.Is(err, forwarder.ErrInstanceIDTaken) {
		return fmt.Errorf("%w (setting instance-id, flag --instance-id)", err)
	}
	return err
}

// stopped is nil for a shutdown: a signal during start-up cancels whatever
// the forwarder was doing, and that is not a failure.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (s server) forwarderConfig(brokers []string) forwarder.Config {
	cfg := s.cfg
	c := forwarder.Config{
		Brokers:           brokers,
		Topics:            kdelay.Topics{Prefix: cfg.TopicPrefix},
		Levels:            cfg.Levels,
		Group:             cfg.Group,
		Mode:              forwarder.Mode(cfg.Mode),
		Delivery:          forwarder.Delivery(cfg.Delivery),
		CheckInterval:     cfg.CheckInterval,
		FetchMaxWait:      cfg.FetchMaxWait,
		IdleFetchMaxWait:  cfg.IdleFetchMaxWait,
		MaxBufferedBytes:  cfg.MaxBufferedBytes,
		MaxDelay:          cfg.MaxDelay,
		DeliveryTimeout:   cfg.DeliveryTimeout,
		CommitInterval:    cfg.CommitInterval,
		CommitLinger:      cfg.CommitLinger,
		StuckAfter:        cfg.StuckAfter,
		SessionTimeout:    cfg.SessionTimeout,
		InstanceID:        cfg.InstanceID,
		ShutdownTimeout:   cfg.ShutdownTimeout,
		Partitions:        cfg.Partitions,
		ReplicationFactor: cfg.ReplicationFactor,
		Retention:         cfg.Retention,
		RetentionHeadroom: cfg.RetentionHeadroom,
		ClientOpts:        append(cfg.ClientOpts(), kgo.WithLogger(kslog.New(s.kafkaLog))),
		Logger:            s.log,
	}
	c.TransactionalIDSuffix = s.txnIDSuffix
	return c
}

// printHowTo tells a person who just started kdelay how to use it.
func printHowTo(w io.Writer, cfg config.Config, brokers []string) {
	addr := strings.Join(brokers, ",")
	ingress := kdelay.Topics{Prefix: cfg.TopicPrefix}.Ingress()
	if cfg.Embedded() {
		fmt.Fprintf(w, "kdelay is ready: embedded Kafka broker at %s (data in %s)\n", addr, cfg.DataDir)
	} else {
		fmt.Fprintf(w, "kdelay is ready: forwarding on brokers %s\n", addr)
	}
	var flags string
	if !cfg.Embedded() || addr != config.DefaultListen {
		flags += " --brokers " + addr
	}
	if cfg.TopicPrefix != kdelay.DefaultPrefix {
		flags += " --topic-prefix " + cfg.TopicPrefix
	}
	fmt.Fprintf(w, "Write records to %s with a %s header and a %s (or %s) header:\n",
		ingress, kdelay.HeaderTarget, kdelay.HeaderDelay, kdelay.HeaderDeliverAt)
	fmt.Fprintf(w, "  echo hello | kcat -P -b %s -t %s -H %s=orders -H %s=90s\n", addr, ingress, kdelay.HeaderTarget, kdelay.HeaderDelay)
	fmt.Fprintf(w, "  kdelay send%s --target orders --delay 90s hello\n", flags)
	fmt.Fprintf(w, "Watch them arrive:\n  kdelay tail%s orders\n", flags)
	if cfg.TLS != nil || cfg.SASL != nil {
		// The flags above do not repeat them: a password must not be
		// printed, and a file of settings is what send and tail should share.
		fmt.Fprintln(w, "send, tail and kcat need the same TLS and SASL settings: the same --config file or KDELAY_* variables")
	}
}
