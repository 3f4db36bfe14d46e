package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// benchFlags are the flags `kdelay bench` and `kdelay bench scale` share.
type benchFlags struct {
	brokers                      []string
	runInProcess, measureRunning bool
	prefix, group                string
	pid                          int
	partitions                   int32
	delivery                     string
	grace                        time.Duration
	json, benchfmt, svg          string
	serveLog                     string
	quiet                        bool
	serveLogFile                 *os.File
	security                     config.Config // its tls and sasl settings only
}

func newBench() *cobra.Command {
	var f benchFlags
	var w workloadFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure how late kdelay delivers, per level, beside the machine's floor and RocketMQ-style polling",
		Long: `Measure how late kdelay delivers: each record's arrival at a consumer of its target
minus its kdelay-deliver-at, per level, per multi-hop delay and per hop count, in exact
mode and in the RocketMQ-style poll mode on the same workload, beside the machine's
floor (a timer and one produce), then kdelay's throughput beside a raw franz-go copy.

With no --brokers it starts an embedded broker in this process and runs the forwarder
under test as a child 'kdelay serve', so that its CPU and memory are its own. With
--brokers it runs on that cluster; add --running to measure a kdelay serve already
running there (--topic-prefix, --group, --pid).

Prints a table and Go benchmark lines (benchstat reads the output as it is) on stdout,
a progress bar on stderr, and writes --json, --svg and --benchfmt files. The default
workload takes about 7 minutes on the embedded broker: its longest delay, 3m17s, runs
in each mode.`,
		Example: `  kdelay bench --json bench.json --svg bench.svg | tee bench.txt
  kdelay bench --delivery exactly-once --modes exact --json bench-eos.json
  kdelay bench --levels 1s,5s --delays 1.4s,7.3s --burst 1000 --copy 10000
  benchstat -col /mode bench.txt`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			w.modesSet = cmd.Flags().Changed("modes")
			if err := f.loadSecurity(cmd); err != nil {
				return usageError{err}
			}
			cfg, err := f.config(w)
			if err != nil {
				return usageError{err}
			}
			defer f.close()
			rep, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return f.write(rep, cmd.OutOrStdout())
		},
	}
	f.add(cmd.PersistentFlags())
	w.add(cmd.Flags())
	cmd.AddCommand(newBenchScale(&f), newBenchFaults(&f), newBenchCommands(&f), newBenchSoak(&f), newBenchSweep(&f), newBenchSchedules(&f))
	return cmd
}

func newBenchScale(f *benchFlags) *cobra.Command {
	var cfg bench.ScaleConfig
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure the forwarder's memory and idle CPU with many records pending, and a large burst",
		Long: `Measure the forwarder's resident memory with nothing pending and with --pending records
waiting in the largest level, its CPU while they wait, and how long a burst of --burst
records all due in the same millisecond takes to be delivered. Sizes of 1,000,000 take
a few minutes; use 100000 for a quick look.`,
		Example: "  kdelay bench scale --json scale.json\n  kdelay bench scale --pending 100000 --burst 100000 --settle 5s --idle 10s",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.loadSecurity(cmd); err != nil {
				return usageError{err}
			}
			if err := f.fillScaleConfig(&cfg); err != nil {
				return usageError{err}
			}
			defer f.close()
			rep, err := bench.Scale(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return f.write(rep, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Pending, "pending", 1_000_000, "records waiting in the largest level while memory and idle CPU are measured")
	fl.IntVar(&cfg.Burst, "burst", 1_000_000, "records due in the same millisecond")
	fl.DurationVar(&cfg.BurstLead, "burst-lead", 30*time.Second, "how long after the burst starts being written it is due")
	fl.DurationVar(&cfg.Settle, "settle", 20*time.Second, "how long the forwarder is left alone before its memory is read")
	fl.DurationVar(&cfg.Idle, "idle", 30*time.Second, "how long CPU is measured while records wait")
	return cmd
}

func (f *benchFlags) add(fl *pflag.FlagSet) {
	fl.StringSliceVar(&f.brokers, "brokers", nil, "Kafka seed brokers, host:port, comma-separated; empty starts an embedded broker in this process")
	fl.BoolVar(&f.runInProcess, "in-process", false, "run the forwarder in this process instead of as a child kdelay serve (its CPU and memory then include the broker's)")
	fl.BoolVar(&f.measureRunning, "running", false, "measure a kdelay serve already running on --brokers, with --topic-prefix and --group")
	fl.StringVar(&f.prefix, "topic-prefix", kdelay.DefaultPrefix, "with --running: the topic prefix of the running kdelay serve")
	fl.StringVar(&f.group, "group", "kdelay", "with --running: the group of the running kdelay serve")
	fl.IntVar(&f.pid, "pid", 0, "with --running: its process id, to read its CPU and memory")
	fl.StringVar(&f.delivery, "delivery", string(forwarder.DefaultDelivery),
		`the forwarder's delivery: at-least-once, or exactly-once, whose target is read with isolation.level=read_committed; with --running, the one it runs`)
	fl.Int32Var(&f.partitions, "partitions", 6, "partitions of the topics the benchmark and the forwarder create")
	fl.DurationVar(&f.grace, "grace", 30*time.Second, "how long after its due time a record may arrive before it counts as lost")
	fl.StringVar(&f.json, "json", "", "write the report as JSON to this file")
	fl.StringVar(&f.benchfmt, "benchfmt", "", "write the Go benchmark lines to this file too")
	fl.StringVar(&f.svg, "svg", "", "write a chart of lateness per level and mode to this SVG file")
	fl.StringVar(&f.serveLog, "serve-log", "", "write the logs of the child kdelay serve to this file")
	fl.BoolVar(&f.quiet, "quiet", false, "show no progress bar")
	config.AddSecurityFlags(fl)
}

// loadSecurity reads the tls and sasl settings, from the flags, the
// environment and --config like those of serve, for the benchmark's
// clients and its child kdelay serve.
func (f *benchFlags) loadSecurity(cmd *cobra.Command) error {
	// bench's --brokers is its own flag: give it to the check that TLS and
	// SASL go with brokers, not with the embedded broker.
	env := append(os.Environ(), "KDELAY_BROKERS="+strings.Join(f.brokers, ","))
	cfg, err := config.Load(cmd.Flags(), env)
	f.security = cfg
	return err
}

// forwarderRunner is the forwarder under test the flags ask for.
func (f *benchFlags) forwarderRunner() (bench.Runner, error) {
	switch {
	case f.measureRunning && f.runInProcess:
		return nil, errors.New("--running and --in-process exclude each other: measure a running kdelay serve, or run one here")
	case f.measureRunning && len(f.brokers) == 0:
		return nil, errors.New("--running needs --brokers: the cluster the running kdelay serve uses")
	case f.measureRunning:
		return bench.Running{Topics: kdelay.Topics{Prefix: f.prefix}, Group: f.group, PID: f.pid}, nil
	case f.runInProcess:
		return bench.InProcess{}, nil
	}
	c := bench.Command{Env: f.security.SecurityEnviron()}
	if f.serveLog != "" {
		file, err := os.Create(f.serveLog)
		if err != nil {
			return nil, fmt.Errorf("serve-log: %w", err)
		}
		f.serveLogFile, c.Stderr = file, file
	}
	return c, nil
}

func (f *benchFlags) close() {
	if f.serveLogFile != nil {
		f.serveLogFile.Close()
	}
}

// progress is stderr when it is a terminal: a bar redrawn in a log file
// is noise.
func (f *benchFlags) progress() io.Writer {
	if f.quiet || !term.IsTerminal(int(os.Stderr.Fd())) {
		return nil
	}
	return os.Stderr
}

func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (f *benchFlags) config(w workloadFlags) (bench.Config, error) {
	runner, err := f.forwarderRunner()
	if err != nil {
		return bench.Config{}, err
	}
	set := levels.Default()
	workload := w.workload(set)
	var modes []forwarder.Mode
	for _, m := range w.modes {
		modes = append(modes, forwarder.Mode(m))
	}
	if f.measureRunning && !w.modesSet {
		modes = nil // the running forwarder's: exact unless --modes says
	}
	if f.measureRunning && len(modes) > 1 {
		return bench.Config{}, errors.New("--running measures the one mode the running kdelay serve has: name it with --modes exact or --modes poll")
	}
	return bench.Config{
		Brokers: f.brokers, Runner: runner, Modes: modes, Delivery: forwarder.Delivery(f.delivery), Levels: set, Workload: workload,
		Partitions: f.partitions, Grace: f.grace, Seed: w.seed, Progress: f.progress(), Logger: logger(),
		ClientOpts: f.security.ClientOpts(),
	}, nil
}

func (f *benchFlags) fillScaleConfig(cfg *bench.ScaleConfig) error {
	runner, err := f.forwarderRunner()
	if err != nil {
		return err
	}
	cfg.Brokers, cfg.Runner, cfg.Partitions, cfg.Grace = f.brokers, runner, f.partitions, f.grace
	cfg.Delivery = forwarder.Delivery(f.delivery)
	cfg.Progress, cfg.Logger, cfg.ClientOpts = f.progress(), logger(), f.security.ClientOpts()
	return nil
}

// write prints the table and the benchmark lines, and writes the files
// asked for.
func (f *benchFlags) write(rep *bench.Report, out io.Writer) error {
	if err := bench.WriteTable(out, rep); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if err := bench.WriteBenchfmt(out, rep); err != nil {
		return err
	}
	return writeFiles(rep, reportFile[*bench.Report]{f.json, bench.WriteJSON},
		reportFile[*bench.Report]{f.benchfmt, bench.WriteBenchfmt}, reportFile[*bench.Report]{f.svg, bench.WriteSVG})
}

// reportFile is a file a bench command writes rep to when a flag names it.
type reportFile[R any] struct {
	path   string // "" when not asked for
	render func(io.Writer, R) error
}

// writeFiles writes rep to each file asked for.
func writeFiles[R any](rep R, files ...reportFile[R]) error {
	var errs []error
	for _, file := range files {
		if file.path != "" {
			errs = append(errs, writeFile(file.path, func(w io.Writer) error { return file.render(w, rep) }))
		}
	}
	return errors.Join(errs...)
}

// missedGoals says each goal not met as a failed command reports it.
func missedGoals(goals []bench.Goal) []string {
	var missed []string
	for _, g := range goals {
		if !g.Met {
			missed = append(missed, fmt.Sprintf("%s: %s, want %s", g.Name, g.Got, g.Want))
		}
	}
	return missed
}

func writeFile(path string, write func(io.Writer) error) error {
	file, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(file); err != nil {
		file.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return file.Close()
}

// workloadFlags are the flags of `kdelay bench` that shape its workload.
type workloadFlags struct {
	modes     []string
	modesSet  bool
	levels    []string
	perLevel  int
	delays    []time.Duration
	perDelay  int
	spread    time.Duration
	rate      int
	rateFor   time.Duration
	rateDelay time.Duration
	burst     int
	burstLead time.Duration
	copy      int
	copyRuns  int
	seed      uint64
}

func (w *workloadFlags) add(fl *pflag.FlagSet) {
	d := bench.DefaultWorkload(levels.Default())
	fl.StringSliceVar(&w.modes, "modes", []string{"exact", "poll"}, "forwarder modes to measure, one after the other")
	fl.StringSliceVar(&w.levels, "levels", d.Levels, `levels that get --per-level records each, or "all"`)
	fl.IntVar(&w.perLevel, "per-level", d.PerLevel, "records per level, each delayed by exactly its level")
	fl.DurationSliceVar(&w.delays, "delays", d.Delays, "delays that take several hops and leave a remainder")
	fl.IntVar(&w.perDelay, "per-delay", d.PerDelay, "records per delay of --delays")
	fl.DurationVar(&w.spread, "spread", d.Spread, "records per level and per delay are sent at random times over this long")
	fl.IntVar(&w.rate, "rate", d.Rate, "records per second of the steady-rate part; 0 leaves it out")
	fl.DurationVar(&w.rateFor, "rate-for", d.RateFor, "how long the steady rate is sent")
	fl.DurationVar(&w.rateDelay, "rate-delay", d.RateDelay, "delay of each steady-rate record")
	fl.IntVar(&w.burst, "burst", d.Burst, "records all due in the same millisecond; 0 leaves the burst out")
	fl.DurationVar(&w.burstLead, "burst-lead", d.BurstLead, "how long after it is sent the burst is due")
	fl.IntVar(&w.copy, "copy", d.Copy, "records for the throughput comparison with a raw copy; 0 leaves it out")
	fl.IntVar(&w.copyRuns, "copy-runs", d.CopyRuns, "times the throughput comparison runs; the median counts")
	fl.Uint64Var(&w.seed, "seed", 1, "seed of the random send times")
}

func (w *workloadFlags) workload(set levels.Set) bench.Workload {
	names := w.levels
	if len(names) == 1 && strings.EqualFold(names[0], "all") {
		names = set.Names()
	}
	return bench.Workload{
		Levels: names, PerLevel: w.perLevel, Delays: w.delays, PerDelay: w.perDelay, Spread: w.spread,
		Rate: w.rate, RateFor: w.rateFor, RateDelay: w.rateDelay, Burst: w.burst, BurstLead: w.burstLead,
		Copy: w.copy, CopyRuns: w.copyRuns,
	}
}
