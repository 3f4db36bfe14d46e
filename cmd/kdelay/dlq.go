package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
)

// flushEvery is how many rows of a listing are aligned together: a table
// writer holds its rows until it flushes.
const flushEvery = 1000

func newDLQ() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List dead letters with their reason; replay them to the ingress once the cause is fixed",
		Long: `Read <topic-prefix>.dlq, where kdelay puts the records it cannot deliver with
the reason (kdelay-error) and where each failed (kdelay-source).

  kdelay dlq list     the dead letters: age, source, target, id and reason
  kdelay dlq replay   write chosen ones to the ingress again, with their id

Both read the topic up to the end it has when they start, and stop there.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usageError{errors.New("name a command: list or replay")}
		},
	}
	cmd.AddCommand(newDLQList(), newDLQReplay())
	return cmd
}

// addFilterFlags adds the flags that select dead letters.
func addFilterFlags(cmd *cobra.Command, f *filter) {
	cmd.Flags().StringVar(&f.reason, "reason", "", "only dead letters whose reason contains this text, in any case")
	cmd.Flags().StringVar(&f.target, "target", "", "only dead letters for this target topic")
}

func newDLQList() *cobra.Command {
	var f filter
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--reason TEXT] [--target TOPIC] [--json]",
		Short: "List dead letters: age, source, target, id and reason",
		Long: `List the records of <topic-prefix>.dlq, oldest first in each partition:

  AGE     how long ago it was dead-lettered
  SOURCE  topic/partition/offset where it failed: what dlq replay takes
  TARGET  its kdelay-target, - if it has none
  ID      the id it is delivered with once replayed
  REASON  why it failed and how to fix it; a dead letter cut to fit the DLQ says so,
          and cannot be replayed

A long listing says how far it got on standard error.`,
		Example: "  kdelay dlq list\n  kdelay dlq list --reason 'does not exist' --target orders\n  kdelay dlq list --json | jq -r .source",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			return listDLQ(cmd.Context(), cfg, f, asJSON, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addFilterFlags(cmd, &f)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per dead letter, one per line, for scripts")
	config.AddClientFlags(cmd.Flags())
	return cmd
}

// listedLetter is one object of `kdelay dlq list --json`.
type listedLetter struct {
	Place      string    `json:"dlq"` // the dead letter's own topic/partition/offset
	Source     string    `json:"source"`
	Target     string    `json:"target"`
	ID         string    `json:"id"`
	Reason     string    `json:"reason"`
	Truncated  string    `json:"truncated,omitempty"`
	Time       time.Time `json:"time"` // when it was dead-lettered
	AgeSeconds float64   `json:"age_seconds"`
}

func listDLQ(ctx context.Context, cfg config.Config, f filter, asJSON bool, out, progress io.Writer) error {
	cl, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer cl.Close()
	topic := kdelay.Topics{Prefix: cfg.TopicPrefix}.DLQ()
	now := time.Now()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	enc := json.NewEncoder(out)
	if !asJSON {
		fmt.Fprintln(tw, "AGE\tSOURCE\tTARGET\tID\tREASON")
	}
	read, shown := 0, 0
	err = readDLQ(ctx, cfg, kadm.NewClient(cl), topic, progress, func(d deadLetter) {
		read++
		if !f.match(d) {
			return
		}
		shown++
		if asJSON {
			_ = enc.Encode(listedLetter{Place: d.place(), Source: d.source, Target: d.target, ID: d.id(), Reason: d.reason,
				Truncated: d.truncated, Time: d.rec.Timestamp.UTC(), AgeSeconds: d.age(now).Seconds()})
			return
		}
		reason := d.reason
		if d.truncated != "" {
			reason += " [truncated " + d.truncated + ": cannot be replayed]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ageText(d.age(now)), d.source, orDash(d.target), d.id(), reason)
		if shown%flushEvery == 0 {
			_ = tw.Flush() // a long listing shows as it goes, not all at the end
		}
	})
	if !asJSON {
		_ = tw.Flush()
		fmt.Fprintf(progress, "listed %d of %s in %s\n", shown, plural(read, "dead letter"), topic)
	}
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
