package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// soakFlags are the flags of `kdelay bench soak` beyond those of bench.
type soakFlags struct {
	cfg    bench.SoakConfig
	csv    string
	levels []string
}

func newBenchSoak(f *benchFlags) *cobra.Command {
	var sf soakFlags
	cmd := &cobra.Command{
		Use:   "soak",
		Short: "Run kdelay serve under a steady load for a long time and check that its memory does not grow",
		Long: `Write --rate records a second to the ingress of a kdelay serve for --duration, each
delayed log-uniformly from --min-delay to --max-delay, and every --interval sample the
kdelay serve process: resident memory, Go heap in use, Go live heap (after the last
collection), goroutines, open files and established TCP connections (from its /metrics
and /proc), its CPU, and the lateness of what arrived since the sample before, beside
the machine's floor (a timer and one produce) measured in the same run.

After --warmup it fits a line to each figure (Theil–Sen: the median slope between every
two samples) and gives its growth per hour with its noise. The command fails when
resident memory or the live heap grows faster than --max-growth MB an hour by more than
the noise, or when a record due within the run came early or was lost: a short run
catches a leak that grows fast; only a long one can tell 1 MB an hour from none. The
warm-up must outlast --max-delay: deliveries ramp up until then.

With no --brokers the embedded broker runs as a kdelay serve of its own, sampled beside
the one under test: it keeps every record until retention drops them, and in one
process its growth would hide kdelay's. With --brokers it runs on that cluster; add
--running (with --pid and --admin) to soak a kdelay serve already running there, its
own embedded broker included if it has one.

Prints a line per sample on stderr, a table at the end, and writes --csv, --json and
--svg (memory through the run). The default takes one hour.`,
		Example: `  kdelay bench soak --brokers 127.0.0.1:9092 --csv soak.csv --svg soak.svg
  kdelay bench soak --duration 5m --max-delay 60s --interval 5s
  kdelay bench soak --brokers kafka:9092 --running --pid 4242 --admin 127.0.0.1:9464 --duration 24h`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.loadSecurity(cmd); err != nil {
				return usageError{err}
			}
			cfg, err := sf.config(f)
			if err != nil {
				return usageError{err}
			}
			defer f.close()
			rep, err := bench.Soak(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return f.writeSoak(rep, sf.csv, cmd.OutOrStdout())
		},
	}
	d := bench.SoakConfig{}.WithDefaults()
	fl := cmd.Flags()
	fl.IntVar(&sf.cfg.Rate, "rate", d.Rate, "records per second written to the ingress")
	fl.DurationVar(&sf.cfg.MinDelay, "min-delay", d.MinDelay, "shortest delay; delays are drawn log-uniformly from it to --max-delay")
	fl.DurationVar(&sf.cfg.MaxDelay, "max-delay", d.MaxDelay, "longest delay; records due after the run are left pending")
	fl.DurationVar(&sf.cfg.Duration, "duration", d.Duration, "how long the load runs and samples are taken")
	fl.DurationVar(&sf.cfg.Interval, "interval", d.Interval, "time between samples")
	fl.DurationVar(&sf.cfg.Warmup, "warmup", 0, "start of the run left out of the slopes (default a tenth of --duration, at least 2m, at most half)")
	fl.Float64Var(&sf.cfg.MaxGrowth, "max-growth", d.MaxGrowth, "MB per hour that resident memory and the live heap may grow after the warm-up, beyond the run's noise")
	fl.StringVar(&sf.cfg.Admin, "admin", d.Admin, "with --running: the admin listener of the running kdelay serve, whose /metrics is sampled")
	fl.StringArrayVar(&sf.cfg.ServeFlags, "serve-flag", nil, "a flag for the kdelay serve under test, e.g. --serve-flag=--max-buffered-bytes=32MiB; repeat for more")
	fl.StringSliceVar(&sf.levels, "levels", d.Levels.Names(), "the levels of the kdelay serve under test (with --running: the ones it runs), whose groups must be ready before the load starts")
	fl.StringVar(&sf.csv, "csv", "", "write the samples as CSV to this file")
	fl.Uint64Var(&sf.cfg.Seed, "seed", d.Seed, "seed of the random delays")
	return cmd
}

// config is the SoakConfig the flags ask for.
func (sf *soakFlags) config(f *benchFlags) (bench.SoakConfig, error) {
	switch {
	case f.runInProcess:
		return bench.SoakConfig{}, errors.New("--in-process does not apply to soak: it samples a kdelay serve process of its own, or one running (--running)")
	case f.benchfmt != "":
		return bench.SoakConfig{}, errors.New("--benchfmt does not apply to soak: use --csv or --json")
	case f.measureRunning && len(sf.cfg.ServeFlags) > 0:
		return bench.SoakConfig{}, errors.New("--serve-flag does not apply with --running: the running kdelay serve has its own flags")
	}
	runner, err := f.forwarderRunner()
	if err != nil {
		return bench.SoakConfig{}, err
	}
	set, err := levels.Parse(sf.levels)
	if err != nil {
		return bench.SoakConfig{}, fmt.Errorf("--levels: %w", err)
	}
	cfg := sf.cfg
	cfg.Levels = set
	cfg.Brokers, cfg.Runner, cfg.Partitions, cfg.Grace = f.brokers, runner, f.partitions, f.grace
	cfg.Delivery = forwarder.Delivery(f.delivery)
	cfg.Logger, cfg.ClientOpts = logger(), f.security.ClientOpts()
	if !f.quiet {
		// A line per sample, not a bar: it reads as well in a CI log.
		cfg.Progress = os.Stderr
	}
	return cfg, nil
}

// writeSoak prints the table and writes the files asked for; a goal missed
// or a run that ended early makes the command fail, after its figures are
// out.
func (f *benchFlags) writeSoak(rep *bench.SoakReport, csv string, out io.Writer) error {
	if err := bench.WriteSoakTable(out, rep); err != nil {
		return err
	}
	type file = reportFile[*bench.SoakReport]
	if err := writeFiles(rep, file{csv, bench.WriteSoakCSV}, file{f.json, bench.WriteSoakJSON}, file{f.svg, bench.WriteSoakSVG}); err != nil {
		return err
	}
	if rep.Met() {
		return nil
	}
	missed := missedGoals(rep.Goals)
	if rep.Error != "" {
		missed = append(missed, "the run ended early: "+rep.Error)
	}
	return fmt.Errorf("soak failed: %s", strings.Join(missed, "; "))
}
