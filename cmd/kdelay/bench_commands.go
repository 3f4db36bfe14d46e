package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/forwarder"
)

func newBenchCommands(f *benchFlags) *cobra.Command {
	var cfg bench.CommandsConfig
	cmd := &cobra.Command{
		Use:   "commands",
		Short: "Measure what live cancels cost: the forwarder's memory, its start, and the lateness of other records",
		Long: `Measure what live commands cost kdelay serve. It reads serve's resident memory and the
lateness of ordinary records beside the machine's floor with no command live, restarts
serve to time a start, writes --commands cancels for ids no record has (each kept its
whole ttl, as a cancel that came too late is), restarts serve to time loading them, and
measures its memory and the same records' lateness again with them all live.
1,000,000 takes about 3 minutes on the embedded broker; use 100000 for a quick look.`,
		Example: "  kdelay bench commands --json commands.json\n  kdelay bench commands --commands 100000 --settle 5s",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.loadSecurity(cmd); err != nil {
				return usageError{err}
			}
			if f.measureRunning {
				return usageError{errors.New("--running does not apply to commands: it restarts kdelay serve, so it starts its own")}
			}
			runner, err := f.forwarderRunner()
			if err != nil {
				return usageError{err}
			}
			defer f.close()
			cfg.Brokers, cfg.Runner, cfg.Partitions, cfg.Grace = f.brokers, runner, f.partitions, f.grace
			cfg.Delivery = forwarder.Delivery(f.delivery)
			cfg.Progress, cfg.Logger, cfg.ClientOpts = f.progress(), logger(), f.security.ClientOpts()
			rep, err := bench.Commands(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return f.write(rep, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&cfg.Commands, "commands", 1_000_000, "cancels live while memory and lateness are measured the second time")
	fl.DurationVar(&cfg.Settle, "settle", 20*time.Second, "how long the forwarder is left alone before its memory is read")
	return cmd
}
