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

// sweepFlags are the flags of `kdelay bench sweep` beyond those of bench.
type sweepFlags struct {
	cfg    bench.SweepConfig
	csv    string
	levels []string
}

func newBenchSweep(f *benchFlags) *cobra.Command {
	var sf sweepFlags
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Measure lateness beside the floor, peak memory and CPU of kdelay serve at a series of sustained rates",
		Long: `For each rate of --rates, start a fresh kdelay serve (and a fresh embedded broker), write
that many records a second to its ingress for --for, each delayed log-uniformly from
--min-delay to --max-delay, and report a row: the rate asked and the rate sent (the
writer may not keep up, and the table says so), records delivered, lost, early and
duplicated, lateness p50, p99 and max beside the machine's floor (a timer and one
produce) in the same run, p99 and max less the floor's, the peak RSS of kdelay serve
(the kernel's high-water mark, read from /proc every --interval and at its exit) and
its CPU; with the embedded broker, the broker's too.

Lateness counts only the records due at least --warmup after the load started: in its
first seconds the clients open connections and fetch sessions and kdelay serve's heap
grows from nothing, costs paid once. Those records still count as lost or early.

With --half-max it first measures kdelay's forwarding rate over --max-records records
all due at once (as 'kdelay bench --copy' does) and adds half of it to the rates.

The command fails when a rate misses a goal: p99 − floor ≤ 5 ms, max − floor ≤ 50 ms,
peak RSS ≤ 128 MiB, none lost, none early. --serve-flag passes flags to every kdelay
serve, to compare settings. Prints a line per rate on stderr, a table at the end, and
writes --csv, --json and --svg (lateness and peak RSS against the rate). The default
takes 3 to 5 minutes on the embedded broker, the more the further serve falls behind.`,
		Example: `  kdelay bench sweep --json sweep.json --svg sweep.svg | tee sweep.txt
  kdelay bench sweep --rates 1000,5000 --for 15s
  kdelay bench sweep --half-max --serve-flag=--max-buffered-bytes=512MiB --brokers 127.0.0.1:9092`,
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
			rep, err := bench.Sweep(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return f.writeSweep(rep, sf.csv, cmd.OutOrStdout())
		},
	}
	d := bench.SweepConfig{}.WithDefaults()
	fl := cmd.Flags()
	fl.IntSliceVar(&sf.cfg.Rates, "rates", d.Rates, "records per second written to the ingress, one run each")
	fl.DurationVar(&sf.cfg.For, "for", d.For, "how long each rate is written")
	fl.DurationVar(&sf.cfg.MinDelay, "min-delay", d.MinDelay, "shortest delay; delays are drawn log-uniformly from it to --max-delay")
	fl.DurationVar(&sf.cfg.MaxDelay, "max-delay", d.MaxDelay, "longest delay; records due after a run are left pending")
	fl.DurationVar(&sf.cfg.Warmup, "warmup", d.Warmup, "records due before this long into a run count as lost or early, not for lateness")
	fl.DurationVar(&sf.cfg.Interval, "interval", d.Interval, "time between reads of the processes' memory and CPU from /proc")
	fl.DurationVar(&sf.cfg.P99OverFloor, "max-p99-over-floor", d.P99OverFloor, "goal: each rate's p99 lateness less the floor's p99 at most this")
	fl.DurationVar(&sf.cfg.MaxOverFloor, "max-over-floor", d.MaxOverFloor, "goal: each rate's max lateness less the floor's max at most this")
	fl.BoolVar(&sf.cfg.HalfMax, "half-max", false, "first measure the maximum forwarding rate and add half of it to --rates")
	fl.IntVar(&sf.cfg.MaxRecords, "max-records", d.MaxRecords, "with --half-max: records all due at once the maximum rate is measured over")
	fl.StringArrayVar(&sf.cfg.ServeFlags, "serve-flag", nil, "a flag for every kdelay serve under test, e.g. --serve-flag=--max-buffered-bytes=512MiB; repeat for more")
	fl.StringSliceVar(&sf.levels, "levels", d.Levels.Names(), "the levels of the kdelay serve under test")
	fl.StringVar(&sf.csv, "csv", "", "write a row per rate as CSV to this file")
	fl.Uint64Var(&sf.cfg.Seed, "seed", d.Seed, "seed of the random delays")
	return cmd
}

// config is the SweepConfig the flags ask for.
func (sf *sweepFlags) config(f *benchFlags) (bench.SweepConfig, error) {
	switch {
	case f.runInProcess:
		return bench.SweepConfig{}, errors.New("--in-process does not apply to sweep: it measures the memory and CPU of a kdelay serve process of its own")
	case f.measureRunning:
		return bench.SweepConfig{}, errors.New("--running does not apply to sweep: it starts a fresh kdelay serve for each rate")
	case f.benchfmt != "":
		return bench.SweepConfig{}, errors.New("--benchfmt does not apply to sweep: use --csv or --json")
	}
	runner, err := f.forwarderRunner()
	if err != nil {
		return bench.SweepConfig{}, err
	}
	set, err := levels.Parse(sf.levels)
	if err != nil {
		return bench.SweepConfig{}, fmt.Errorf("--levels: %w", err)
	}
	cfg := sf.cfg
	cfg.Levels = set
	cfg.Brokers, cfg.Runner, cfg.Partitions, cfg.Grace = f.brokers, runner, f.partitions, f.grace
	cfg.Delivery = forwarder.Delivery(f.delivery)
	cfg.Logger, cfg.ClientOpts = logger(), f.security.ClientOpts()
	if !f.quiet {
		// A line per rate, not a bar: it reads as well in a CI log.
		cfg.Progress = os.Stderr
	}
	return cfg, nil
}

// writeSweep prints the table and writes the files asked for; a goal
// missed or a rate that ended early makes the command fail, after its
// figures are out.
func (f *benchFlags) writeSweep(rep *bench.SweepReport, csv string, out io.Writer) error {
	if err := bench.WriteSweepTable(out, rep); err != nil {
		return err
	}
	type file = reportFile[*bench.SweepReport]
	if err := writeFiles(rep, file{csv, bench.WriteSweepCSV}, file{f.json, bench.WriteSweepJSON}, file{f.svg, bench.WriteSweepSVG}); err != nil {
		return err
	}
	if rep.Met() {
		return nil
	}
	missed := missedGoals(rep.Goals)
	for _, r := range rep.Rows {
		if r.Error != "" {
			missed = append(missed, fmt.Sprintf("the run at %d/s ended early: %s", r.Rate, r.Error))
		}
	}
	return fmt.Errorf("sweep failed: %s", strings.Join(missed, "; "))
}
