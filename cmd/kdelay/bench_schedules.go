package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// schedulesFlags are the flags of `kdelay bench schedules` beyond those of
// bench.
type schedulesFlags struct {
	cfg    bench.SchedulesConfig
	levels []string
}

func newBenchSchedules(f *benchFlags) *cobra.Command {
	var sf schedulesFlags
	cmd := &cobra.Command{
		Use:   "schedules",
		Short: "Measure the memory of kdelay serve with many recurring schedules, and the lateness of their occurrences beside the floor",
		Long: `Start a fresh kdelay serve (and a fresh embedded broker, a kdelay serve of its own), read
its resident memory, write --schedules schedules to its schedules topic (all but --timed
of them fire once a day, none within the run), wait until serve has them all in force
(kdelay_schedules), let it settle for --settle and read its memory again. Then write
--timed schedules firing --every and, for --for, time their occurrences at the target
beside the floor: for each occurrence, a plain timer that produces a record to the same
target at its time, read by the same consumer. Occurrences due within --warmup count for
loss and earliness only.

Prints the memory (with no schedule, with them, per schedule, and the peak, the
kernel's high-water mark read every --interval and at exit), what the scheduler's
index holds (kdelay_schedule_index_bytes), how long writing and loading took, and the
lateness of the occurrences and of the floor. Fails when an occurrence due within the
run is lost or early, or the index holds more than 72 bytes a schedule and a page a
partition. The default, 1,000,000 schedules, takes about 2 minutes on the embedded
broker and a GiB of memory; --schedules 100000 takes one.`,
		Example: `  kdelay bench schedules --json schedules.json | tee schedules.txt
  kdelay bench schedules --schedules 100000 --timed 100 --for 30s`,
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
			rep, err := bench.Schedules(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return f.writeSchedules(rep, cmd.OutOrStdout())
		},
	}
	d := bench.SchedulesConfig{}.WithDefaults()
	fl := cmd.Flags()
	fl.IntVar(&sf.cfg.Schedules, "schedules", d.Schedules, "schedules in force while kdelay serve's memory is read, the timed ones included")
	fl.IntVar(&sf.cfg.Timed, "timed", d.Timed, "schedules firing every --every whose occurrences are timed")
	fl.DurationVar(&sf.cfg.Every, "every", d.Every, "interval of the timed schedules, whole seconds")
	fl.DurationVar(&sf.cfg.For, "for", d.For, "how long the occurrences are timed")
	fl.DurationVar(&sf.cfg.Warmup, "warmup", d.Warmup, "occurrences due before this long into --for count for loss and earliness, not lateness")
	fl.DurationVar(&sf.cfg.Settle, "settle", d.Settle, "how long kdelay serve is left alone before its memory is read")
	fl.DurationVar(&sf.cfg.Interval, "interval", d.Interval, "time between reads of kdelay serve's memory from /proc")
	fl.StringArrayVar(&sf.cfg.ServeFlags, "serve-flag", nil, "a flag for the kdelay serve under test; repeat for more")
	fl.StringSliceVar(&sf.levels, "levels", d.Levels.Names(), "the levels of the kdelay serve under test")
	return cmd
}

// config is the SchedulesConfig the flags ask for.
func (sf *schedulesFlags) config(f *benchFlags) (bench.SchedulesConfig, error) {
	switch {
	case f.runInProcess:
		return bench.SchedulesConfig{}, errors.New("--in-process does not apply to schedules: it measures the memory of a kdelay serve process of its own")
	case f.measureRunning:
		return bench.SchedulesConfig{}, errors.New("--running does not apply to schedules: it starts a fresh kdelay serve")
	case f.benchfmt != "" || f.svg != "":
		return bench.SchedulesConfig{}, errors.New("--benchfmt and --svg do not apply to schedules: use --json")
	}
	runner, err := f.forwarderRunner()
	if err != nil {
		return bench.SchedulesConfig{}, err
	}
	set, err := levels.Parse(sf.levels)
	if err != nil {
		return bench.SchedulesConfig{}, fmt.Errorf("--levels: %w", err)
	}
	cfg := sf.cfg
	cfg.Levels = set
	cfg.Brokers, cfg.Runner, cfg.Partitions, cfg.Grace = f.brokers, runner, f.partitions, f.grace
	cfg.Delivery = forwarder.Delivery(f.delivery)
	cfg.Logger, cfg.ClientOpts = logger(), f.security.ClientOpts()
	if !f.quiet {
		cfg.Progress = os.Stderr
	}
	return cfg, nil
}

// writeSchedules prints the report and writes --json; an occurrence lost
// or early makes the command fail, after the figures are out.
func (f *benchFlags) writeSchedules(rep *bench.SchedulesReport, out io.Writer) error {
	if err := bench.WriteSchedulesTable(out, rep); err != nil {
		return err
	}
	type file = reportFile[*bench.SchedulesReport]
	if err := writeFiles(rep, file{f.json, bench.WriteSchedulesJSON}); err != nil {
		return err
	}
	if !rep.Met() {
		return fmt.Errorf("schedules failed: %d occurrences lost and %d early of %d due within the run",
			rep.Occurrences.Lost+rep.Warm.Lost, rep.Occurrences.Early+rep.Warm.Early, rep.Occurrences.Sent+rep.Warm.Sent)
	}
	return nil
}
