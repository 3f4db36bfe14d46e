package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/schedule"
)

// listTimeout bounds reading the schedules topic to its end.
const listTimeout = 30 * time.Second

func newScheduleList() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the recurring schedules in force",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ls, err := listSchedules(cmd)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tCRON\tTIME ZONE\tTARGET\tNEXT\tLAST WRITTEN")
			now := time.Now()
			for _, l := range ls {
				if l.Err != nil {
					fmt.Fprintf(tw, "%s\t(refused: %v)\t\t\t\t\n", l.ID, l.Err)
					continue
				}
				s := l.Schedule
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.ID, s.Spec, s.Zone, s.Target, when(l.Next(now)), when(l.Written))
			}
			return tw.Flush()
		},
	}
	config.AddClientFlags(cmd.Flags())
	return cmd
}

func newScheduleShow() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show the recurring schedule ID and its next occurrences",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var found *schedule.Listed
			err := scanSchedules(cmd, func(l schedule.Listed) {
				if l.ID == args[0] {
					found = &l
				}
			})
			if err != nil {
				return err
			}
			if found == nil {
				return fmt.Errorf("no schedule %s in force: kdelay schedule list shows those that are", args[0])
			}
			return show(cmd.OutOrStdout(), *found)
		},
	}
	config.AddClientFlags(cmd.Flags())
	return cmd
}

func show(out io.Writer, l schedule.Listed) error {
	fmt.Fprintf(out, "id:           %s\nrecord:       partition %d, offset %d\n", l.ID, l.Partition, l.Offset)
	if l.Err != nil {
		fmt.Fprintf(out, "refused:      %v\n", l.Err)
		return nil
	}
	s := l.Schedule
	fmt.Fprintf(out, "cron:         %s\ntime zone:    %s\ntarget:       %s\nmissed:       %s\n", s.Spec, s.Zone, s.Target, s.Missed)
	if !s.Until.IsZero() {
		fmt.Fprintf(out, "until:        %s\n", s.Until.UTC().Format(time.RFC3339))
	}
	if s.Count > 0 {
		fmt.Fprintf(out, "count:        %d\n", s.Count)
	}
	fmt.Fprintf(out, "value:        %q\nlast written: %s\n", l.Value, when(l.Written))
	printNext(out, s, time.Now(), 5)
	return nil
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// listSchedules reads the schedules in force, and those refused, sorted by
// id.
func listSchedules(cmd *cobra.Command) ([]schedule.Listed, error) {
	var ls []schedule.Listed
	err := scanSchedules(cmd, func(l schedule.Listed) { ls = append(ls, l) })
	slices.SortFunc(ls, func(a, b schedule.Listed) int { return strings.Compare(a.ID, b.ID) })
	return ls, err
}

// scanSchedules calls fn with each schedule in force and each refused, in
// no order (schedule.Scan).
func scanSchedules(cmd *cobra.Command, fn func(schedule.Listed)) error {
	cfg, err := config.Load(cmd.Flags(), os.Environ())
	if err != nil {
		return usageError{err}
	}
	rules := scheduleRules(cfg)
	cl, err := connect(cmd.Context(), cfg, schedule.ListOpts(rules.Topics)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), listTimeout)
	defer cancel()
	err = schedule.Scan(ctx, cl, rules, fn)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("read %s: not to its end within %s: check that the broker serves it (kdelay serve creates it)", rules.Topics.Schedules(), listTimeout)
	}
	return err
}
