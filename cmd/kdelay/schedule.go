package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/schedule"
)

func newSchedule() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Create, list, show and delete recurring schedules",
		Long: `A recurring schedule delivers a record to its target at each occurrence of a cron
expression, in a time zone. It is a record on <topic-prefix>.schedules keyed by the
schedule's id, which any producer can write (docs/SCHEDULES.md): these commands write
and read that topic. kdelay serve writes each occurrence into the ingress ahead of
its time, with kdelay-id <id>@<time in UTC>, and delivers it at its time.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usageError{errors.New("name a schedule command: create, list, show or delete")}
		},
	}
	cmd.AddCommand(newScheduleCreate(), newScheduleList(), newScheduleShow(), newScheduleDelete())
	return cmd
}

// scheduleFlags are what `kdelay schedule create` puts on the record.
type scheduleFlags struct {
	fields  kdelay.ScheduleFields
	headers []string
}

func newScheduleCreate() *cobra.Command {
	var f scheduleFlags
	cmd := &cobra.Command{
		Use:   "create ID --cron SPEC --target TOPIC [--time-zone ZONE] [--until TIME] [--count N] [--missed latest|skip] [--header k=v]... [VALUE | -]",
		Short: "Create or replace the recurring schedule ID",
		Long: `Write the schedule ID to <topic-prefix>.schedules, wait for the broker to
acknowledge it, and print its next occurrences. A schedule with the same ID is
replaced: occurrences already written and not yet due that the new one does not
have are cancelled. VALUE (or standard input, as with send) is every
occurrence's value.`,
		Example: `  kdelay schedule create daily-report --cron '0 30 2 * * *' --time-zone Europe/Berlin --target reports '{"report": "daily"}'
  kdelay schedule create heartbeat --cron '@every 30s' --target pings --count 10 ping`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			value, err := sendValue(args[1:], cmd.InOrStdin())
			if err != nil {
				return err
			}
			r, s, err := f.record(scheduleRules(cfg), args[0], value, time.Now())
			if err != nil {
				return usageError{err}
			}
			if err := writeSchedule(cmd.Context(), cfg, r); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "schedule %s: written to %s (partition %d, offset %d)\n", s.ID, r.Topic, r.Partition, r.Offset)
			printNext(out, s, r.Timestamp, 3)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.fields.Spec, "cron", "", "when: cron with seconds ('0 30 2 * * *'), five fields, @hourly, @daily, or @every 90s (required)")
	fl.StringVar(&f.fields.Target, "target", "", "topic to deliver each occurrence to (required)")
	fl.StringVar(&f.fields.TimeZone, "time-zone", "", "IANA time zone the cron expression follows (default UTC)")
	fl.StringVar(&f.fields.Until, "until", "", "no occurrence after this time: RFC 3339 or unix epoch milliseconds")
	fl.StringVar(&f.fields.Count, "count", "", "at most this many occurrences")
	fl.StringVar(&f.fields.Missed, "missed", "", "occurrences missed while kdelay was down: latest (deliver the latest once, the default) or skip")
	fl.StringArrayVar(&f.headers, "header", nil, "header name=value to deliver with each occurrence; repeatable")
	config.AddClientFlags(fl)
	return cmd
}

func scheduleRules(cfg config.Config) kdelay.Rules {
	return kdelay.Rules{Topics: kdelay.Topics{Prefix: cfg.TopicPrefix}, MaxDelay: cfg.MaxDelay}
}

func (f scheduleFlags) record(rules kdelay.Rules, id, value string, now time.Time) (*kgo.Record, kdelay.Schedule, error) {
	switch {
	case f.fields.Spec == "":
		return nil, kdelay.Schedule{}, errors.New("--cron is required: say when, e.g. --cron '0 30 2 * * *' (02:30:00 daily) or --cron '@every 1h'")
	case f.fields.Target == "":
		return nil, kdelay.Schedule{}, errors.New("--target is required: name the topic to deliver each occurrence to")
	}
	var user []kgo.RecordHeader
	for _, h := range f.headers {
		name, v, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return nil, kdelay.Schedule{}, fmt.Errorf("--header %q is not name=value", h)
		}
		user = append(user, kgo.RecordHeader{Key: name, Value: []byte(v)})
	}
	return schedule.Record(rules, id, f.fields, []byte(value), user, now)
}

// writeSchedule produces r and waits for the acknowledgement.
func writeSchedule(ctx context.Context, cfg config.Config, r *kgo.Record) error {
	cl, err := connect(ctx, cfg)
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted before the schedule was written: it was not")
	} else if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("topic %s does not exist on %s: kdelay serve creates it at start (a kdelay older than schedules does not: upgrade it), or check --topic-prefix; "+
				"if you create kdelay's topics yourself, create it compacted: kafka-topics.sh --bootstrap-server %s --create --topic %s --config cleanup.policy=compact",
				r.Topic, strings.Join(cfg.Seeds(), ","), strings.Join(cfg.Seeds(), ","), r.Topic)
		}
		return sendFailed(err, r.Topic, cfg.Seeds())
	}
	return nil
}

// printNext prints the schedule's next n occurrences after now, in its zone.
func printNext(out io.Writer, s kdelay.Schedule, now time.Time, n int) {
	fmt.Fprintf(out, "next occurrences (%s):", s.Zone)
	for at := s.After(now); !at.IsZero() && n > 0; at, n = s.Next(at), n-1 {
		fmt.Fprintf(out, " %s", at.In(s.Zone).Format(time.RFC3339))
	}
	fmt.Fprintln(out)
}

func newScheduleDelete() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete ID",
		Short: "Delete the recurring schedule ID",
		Long: `Write a tombstone for schedule ID to <topic-prefix>.schedules. kdelay writes no
more occurrences of it, and cancels those written and not yet due.`,
		Example: `  kdelay schedule delete daily-report`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			r, err := schedule.Tombstone(kdelay.Topics{Prefix: cfg.TopicPrefix}, args[0])
			if err != nil {
				return usageError{err}
			}
			if err := writeSchedule(cmd.Context(), cfg, r); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "schedule %s: deleted (tombstone written to %s, partition %d, offset %d)\n", args[0], r.Topic, r.Partition, r.Offset)
			return nil
		},
	}
	config.AddClientFlags(cmd.Flags())
	return cmd
}
