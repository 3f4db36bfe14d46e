package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/fleet"
)

func newStatus() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what waits in each level: pending records, the oldest due time, how late, the group's members",
		Long: `Read from Kafka, for the ingress and each level, what a running fleet of kdelay
serve has not yet forwarded:

  PARTITIONS  the topic's partitions
  PENDING     records kdelay's consumer group (--group) has not committed: end
              offset minus committed offset, summed over partitions
  OLDEST DUE  when the earliest head leaves it: the head's timestamp plus the level's
              delay (the ingress forwards on arrival)
  HEAD LATE   now minus OLDEST DUE: how late that head is; negative while it waits
  MEMBERS     kdelay processes in the group, and the group's state

A level topic of the prefix that is not in --levels, which serve drains, is shown
too. Then the recurring schedules, read from <topic-prefix>.schedules to its end:

  SCHEDULES        schedules in force
  REFUSED          schedule records kdelay refuses (kdelay schedule list says why)
  NEXT OCCURRENCE  the earliest occurrence to come, and NEXT ID its schedule
  OVERDUE          schedules whose next occurrence was due and is not written into
                   the ingress (kdelay writes each a minute ahead): no kdelay owns
                   their partition, or the one that does is behind
  MEMBERS          kdelay processes that read the schedules (in <group>), and the
                   group's state

Status only reads: it works from any machine that reaches the brokers. Give it
the topic-prefix, group and levels serve runs with (flags, KDELAY_* or --config).`,
		Example: "  kdelay status --brokers kafka-1:9092\n  kdelay status --json | jq 'select(.pending > 0)'",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			now := time.Now()
			st, err := readStatus(cmd.Context(), cfg, now)
			if err != nil {
				return err
			}
			if asJSON {
				return writeStatusJSON(cmd.OutOrStdout(), st)
			}
			return writeStatusTable(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per level, one per line, then {\"schedules\": {...}}, for scripts")
	config.AddClientFlags(cmd.Flags(), "group", "levels")
	return cmd
}

// status is what kdelay status shows.
type status struct {
	levels    []fleet.LevelStatus
	schedules fleet.ScheduleStatus
}

// readStatus reads every stage's figures and the schedules' from Kafka.
func readStatus(ctx context.Context, cfg config.Config, now time.Time) (status, error) {
	f, err := openFleet(ctx, cfg)
	if err != nil {
		return status{}, err
	}
	defer f.Close()
	st, err := f.Status(ctx, now, nil)
	if none := (*fleet.NoTopicsError)(nil); errors.As(err, &none) {
		return status{}, fmt.Errorf("no kdelay topics with prefix %q on %s: check --topic-prefix, or start kdelay serve (it creates them)",
			cfg.TopicPrefix, strings.Join(cfg.Seeds(), ","))
	}
	if err != nil {
		return status{}, err
	}
	return status{levels: st, schedules: f.Schedules(ctx, now)}, nil
}

func writeStatusJSON(w io.Writer, st status) error {
	enc := json.NewEncoder(w)
	for _, s := range st.levels {
		if err := enc.Encode(s); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
	}
	if err := enc.Encode(map[string]fleet.ScheduleStatus{"schedules": st.schedules}); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// writeStatusTable prints st as a table, with a NOTE column when a figure
// is missing:
//
//	LEVEL    TOPIC            PARTITIONS  PENDING  OLDEST DUE                HEAD LATE  MEMBERS
//	ingress  kdelay.ingress   6           0        -                         -          1 Stable
//	1h       kdelay.level.1h  6           3        2026-11-22T12:57:08.509Z  -59m58s    1 Stable
//
//	SCHEDULES  REFUSED  NEXT OCCURRENCE       NEXT ID       OVERDUE  MEMBERS
//	3          0        2026-11-23T02:30:00Z  daily-report  0        1 Stable
func writeStatusTable(w io.Writer, st status) error {
	if err := writeLevelsTable(w, st.levels); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return writeSchedulesTable(w, st.schedules)
}

func writeLevelsTable(w io.Writer, st []fleet.LevelStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	notes := slices.ContainsFunc(st, func(s fleet.LevelStatus) bool { return s.Problem != "" })
	head := "LEVEL\tTOPIC\tPARTITIONS\tPENDING\tOLDEST DUE\tHEAD LATE\tMEMBERS"
	if notes {
		head += "\tNOTE"
	}
	fmt.Fprintln(tw, head)
	for _, s := range st {
		due, late := "-", "-"
		if s.OldestDue != nil {
			due = s.OldestDue.UTC().Format(timeFormat)
			late = lateText(time.Duration(*s.HeadLateness * float64(time.Second)))
		}
		level := s.Level
		if !s.Configured {
			level += " (dropped)"
		}
		row := fmt.Sprintf("%s\t%s\t%d\t%d\t%s\t%s\t%d %s", level, s.Topic, s.Partitions, s.Pending, due, late, s.Members, s.State)
		if notes {
			row += "\t" + s.Problem
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

func writeSchedulesTable(w io.Writer, s fleet.ScheduleStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head, next, id := "SCHEDULES\tREFUSED\tNEXT OCCURRENCE\tNEXT ID\tOVERDUE\tMEMBERS", "-", "-"
	if s.Next != nil {
		next, id = s.Next.UTC().Format(time.RFC3339), s.NextID
	}
	row := fmt.Sprintf("%d\t%d\t%s\t%s\t%d\t%d %s", s.Schedules, s.Refused, next, id, s.Overdue, s.Members, s.State)
	if s.Problem != "" {
		head, row = head+"\tNOTE", row+"\t"+s.Problem
	}
	fmt.Fprintln(tw, head)
	fmt.Fprintln(tw, row)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// lateText is a lateness as ageText writes it, with a minus sign while the
// head is not yet due.
func lateText(d time.Duration) string {
	if d < 0 {
		return "-" + ageText(-d)
	}
	return ageText(d)
}

// ageText is an age as a person reads it: 4.2s, 3m12s, 26h5m0s.
func ageText(d time.Duration) string {
	if d < time.Minute {
		return short(max(d, 0))
	}
	return d.Round(time.Second).String()
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
