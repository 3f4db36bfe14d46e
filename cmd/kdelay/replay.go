package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
)

func newDLQReplay() *cobra.Command {
	var f filter
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
				f.sources = map[string]bool{}
				for _, s := range args {
					f.sources[s] = true
				}
			}
			if f.empty() == !all {
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
func replayDLQ(ctx context.Context, cfg config.Config, f filter, out, progress io.Writer) error {
	cl, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	rules := kdelay.Rules{Topics: kdelay.Topics{Prefix: cfg.TopicPrefix}, MaxDelay: cfg.MaxDelay}
	chosen, err := choose(ctx, cfg, kadm.NewClient(cl), rules.Topics.DLQ(), f, progress)
	if err != nil {
		return err
	}
	var recs []replayed
	var refused []string
	for _, d := range chosen {
		r, err := d.replay(rules)
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s not replayed: %v", d.source, err))
			continue
		}
		recs = append(recs, replayed{r, d})
	}
	err = produceReplays(ctx, cl, recs, cfg, out)
	fmt.Fprintf(progress, "replayed %d of %s to %s\n", len(recs), plural(len(chosen), "chosen dead letter"), rules.Topics.Ingress())
	if len(refused) > 0 {
		err = errors.Join(append([]error{err}, errors.New(strings.Join(refused, "\n")))...)
	}
	return err
}

// choose reads the DLQ and returns the dead letters f matches, one per
// source: a source dead-lettered twice (kdelay crashed after writing the
// dead letter, before committing) is replayed once.
func choose(ctx context.Context, cfg config.Config, adm *kadm.Client, topic string, f filter, progress io.Writer) ([]deadLetter, error) {
	var chosen []deadLetter
	seen := map[string]bool{}
	err := readDLQ(ctx, cfg, adm, topic, progress, func(d deadLetter) {
		if f.match(d) && !seen[d.source] {
			seen[d.source] = true
			chosen = append(chosen, d)
		}
	})
	if err != nil {
		return nil, err
	}
	var missing []string
	for s := range f.sources {
		if !seen[s] {
			missing = append(missing, s)
		}
	}
	switch {
	case len(missing) > 0:
		return nil, fmt.Errorf("no dead letter in %s has source %s (and reason and target as asked): kdelay dlq list shows the sources; nothing was replayed",
			topic, strings.Join(missing, ", "))
	case len(chosen) == 0:
		return nil, fmt.Errorf("no dead letter in %s matches %s: nothing to replay", topic, f.describe())
	}
	return chosen, nil
}

// replayed is a record written to the ingress for a dead letter.
type replayed struct {
	rec *kgo.Record
	d   deadLetter
}

// produceReplays writes the records of recs to the ingress, in the DLQ's
// order, so those of one key stay in order, and prints, for each, the dead
// letter's source, the id it goes with and where it was written.
func produceReplays(ctx context.Context, cl *kgo.Client, recs []replayed, cfg config.Config, out io.Writer) error {
	if len(recs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	of := map[*kgo.Record]deadLetter{}
	rs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		rs[i], of[r.rec] = r.rec, r.d
	}
	var errs []error
	for _, res := range cl.ProduceSync(ctx, rs...) {
		d := of[res.Record]
		if res.Err != nil {
			errs = append(errs, fmt.Errorf("%s not replayed: %w", d.source, sendFailed(res.Err, res.Record.Topic, cfg.Seeds())))
			continue
		}
		fmt.Fprintf(out, "replayed %s id=%s as %s\n", d.source, d.id(), kdelay.Source(res.Record.Topic, res.Record.Partition, res.Record.Offset))
	}
	return errors.Join(errs...)
}
