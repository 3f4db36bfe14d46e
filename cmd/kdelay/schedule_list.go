package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

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
			rows, err := listRows(cmd, time.Now())
			if err != nil {
				return err
			}
			return printRows(cmd.OutOrStdout(), "ID\tCRON\tTIME ZONE\tTARGET\tNEXT\tLAST WRITTEN", rows)
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

// listRows reads the schedules in force, and those refused, as the rows
// list prints, sorted by id. It keeps each as its row, not the schedule
// (its value, headers and parsed spec): listing a million took the command
// 250 MB of memory, where keeping the schedules took 1.4 GB.
func listRows(cmd *cobra.Command, now time.Time) ([]string, error) {
	var rows []string
	err := scanSchedules(cmd, func(l schedule.Listed) { rows = append(rows, listRow(l, now)) })
	slices.SortFunc(rows, func(a, b string) int { return strings.Compare(rowID(a), rowID(b)) })
	return rows, err
}

// listRow is l's row in list's table, its columns separated by tabs.
func listRow(l schedule.Listed, now time.Time) string {
	if l.Err != nil {
		return fmt.Sprintf("%s\t(refused: %v)\t\t\t\t", l.ID, l.Err)
	}
	s := l.Schedule
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", l.ID, s.Spec, s.Zone, s.Target, when(l.Next(now)), when(l.Written))
}

// printRows prints header and rows, their tab-separated columns aligned
// two spaces apart as text/tabwriter would, without its copy of every cell:
// a writer flushed once for a million rows held them all a second time.
func printRows(out io.Writer, header string, rows []string) error {
	var widths []int
	measure := func(r string) {
		for i, c := range strings.Split(r, "\t") {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	measure(header)
	for _, r := range rows {
		measure(r)
	}
	w := bufio.NewWriter(out)
	var line strings.Builder
	print := func(r string) {
		line.Reset()
		for i, c := range strings.Split(r, "\t") {
			line.WriteString(c)
			line.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
		}
		w.WriteString(strings.TrimRight(line.String(), " "))
		w.WriteByte('\n')
	}
	print(header)
	for _, r := range rows {
		print(r)
	}
	return w.Flush()
}

// rowID is the id a row of listRow begins with.
func rowID(row string) string {
	id, _, _ := strings.Cut(row, "\t")
	return id
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
