package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/fleet"
)

func newDLQReplay() *cobra.Command {
	var f fleet.Filter
	var all bool
	cmd := &cobra.Command{
		Use:   "replay (SOURCE... | --reason TEXT | --target TOPIC | --all)",
		Short: "Write chosen dead letters to the ingress again, with their original id",
		Long: `Write the chosen dead letters to <topic-prefix>.ingress again, once the cause of
their failure is fixed (the target created, its max.message.bytes raised, max-delay
raised), for kdelay to deliver. Choose them by SOURCE, as dlq list prints it, and/or
with --reason and --target; --all replays every dead letter.

Each goes with its key, value, headers and timestamp, without kdelay-error and
kdelay-source, and with its original kdelay-id (a record that failed at the ingress
without one gets its source, the id kdelay gave it). Replaying a dead letter twice
delivers it twice with the same id, so a consumer that dedupes by kdelay-id gets it
once. A source dead-lettered more than once is replayed once.

Refused, with the reason: a dead letter cut to fit the DLQ (kdelay-truncated), whose
original is lost, and one that kdelay would dead-letter again for what it carries (a
bad header), which only its producer can fix. The others are replayed; the exit
status is 1 if any was refused. Give the max-delay serve runs with if you raised it.`,
		Example: `  kdelay dlq replay kdelay.ingress/0/17 kdelay.level.1m/3/2
  kdelay dlq replay --reason 'does not exist' --target orders
  kdelay dlq replay --all`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			if len(args) > 0 {
				f.Sources = map[string]bool{}
				for _, s := range args {
					f.Sources[s] = true
				}
			}
			if f.Empty() == !all {
				return usageError{errors.New("choose the dead letters to replay: their sources (as dlq list prints them), --reason or --target; or --all for every one")}
			}
			return replayDLQ(cmd.Context(), cfg, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addFilterFlags(cmd, &f)
	cmd.Flags().BoolVar(&all, "all", false, "replay every dead letter")
	config.AddClientFlags(cmd.Flags(), "max-delay")
	return cmd
}

// replayDLQ reads the DLQ, then writes the dead letters f chooses to the
// ingress and waits for the broker to acknowledge them. Reading everything
// first means a mistake (a source that is not there) replays nothing.
func replayDLQ(ctx context.Context, cfg config.Config, f fleet.Filter, out, progress io.Writer) error {
	fl, err := openFleet(ctx, cfg)
	if err != nil {
		return err
	}
	defer fl.Close()
	topics := fl.Config().Topics
	chosen, err := fl.Choose(ctx, f, sayProgress(progress, topics.DLQ()))
	if unknown := (*fleet.UnknownSourcesError)(nil); errors.As(err, &unknown) {
		return fmt.Errorf("no dead letter in %s has source %s (and reason and target as asked): kdelay dlq list shows the sources; nothing was replayed",
			unknown.Topic, strings.Join(unknown.Sources, ", "))
	} else if err != nil {
		return dlqFailed(err, cfg)
	}
	var errs, refused []error
	written := 0
	for _, r := range fl.Replay(ctx, chosen) {
		d := r.Letter
		switch {
		case r.Refused != nil:
			refused = append(refused, fmt.Errorf("%s not replayed: %w", d.Source, r.Refused))
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("%s not replayed: %w", d.Source, sendFailed(r.Err, r.Record.Topic, cfg.Seeds())))
		default:
			written++
			fmt.Fprintf(out, "replayed %s id=%s as %s\n", d.Source, d.ID(), kdelay.Source(r.Record.Topic, r.Record.Partition, r.Record.Offset))
		}
	}
	fmt.Fprintf(progress, "replayed %d of %s to %s\n", written, plural(len(chosen), "chosen dead letter"), topics.Ingress())
	return errors.Join(append(errs, refused...)...)
}
