// Command kdelay gives Apache Kafka delayed delivery: records written to
// kdelay.ingress with a kdelay-target and a kdelay-delay (or
// kdelay-deliver-at) header reach their target topic when due.
//
//	kdelay serve                          # run kdelay, with an embedded broker unless --brokers is set
//	kdelay send --target T --delay 90s V  # write one delayed record to the ingress
//	kdelay cancel ID                      # do not deliver the message with kdelay-id ID
//	kdelay reschedule ID --delay 30s      # deliver it at a new time instead (or --at TIME)
//	kdelay run-now ID                     # deliver it now instead
//	kdelay tail T                         # print records as they reach a topic
//	kdelay status                         # what waits in each level, and how late
//	kdelay dlq list | replay              # read the dead letters; replay them once fixed
//
// Settings come from flags, KDELAY_* environment variables and a YAML file
// (--config); `kdelay serve --help` lists them.
//
// Exit status: 0 after a clean shutdown (SIGINT or SIGTERM), 1 when kdelay
// fails while running, 2 for a mistake in the command line or configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/kdelay/kdelay/bench"
)

func main() {
	// The first SIGINT or SIGTERM cancels ctx and starts a clean shutdown;
	// once ctx is done the handler is removed, so a second one kills at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	err := newRoot().ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "kdelay",
		Short:         "Delayed delivery for Apache Kafka with RocketMQ-style delay levels",
		Version:       version(),
		Args:          usageArgs(unknownCommand),
		SilenceErrors: true, // exitCode prints them
		SilenceUsage:  true, // a runtime failure is not a usage mistake
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usageError{errors.New("name a command: serve, send, cancel, reschedule, run-now, tail, status or dlq")}
		},
	}
	// Subcommands inherit this: cmd is the one whose flags were mistyped.
	// In kdelay sned --target orders, root fails on --target before its
	// Args sees sned, the real mistake: pflag has kept sned by then.
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if !cmd.HasParent() {
			if unknown := unknownCommand(cmd, cmd.Flags().Args()); unknown != nil {
				return usageError{unknown}
			}
		}
		return usageError{suggestFlag(cmd, err)}
	})
	// --help lists the commands by what they are for, in this order, rather
	// than all in one alphabetical list.
	root.AddGroup(
		&cobra.Group{ID: groupRun, Title: "Run kdelay:"},
		&cobra.Group{ID: groupRecords, Title: "Delayed records:"},
		&cobra.Group{ID: groupOperate, Title: "Operate it:"})
	root.AddCommand(inGroup(groupRun, newServe()),
		inGroup(groupRecords, newSend()), newCancel(), newReschedule(), newRunNow(), inGroup(groupRecords, newTail()),
		inGroup(groupRecords, newSchedule()),
		inGroup(groupOperate, newStatus()), inGroup(groupOperate, newDLQ()), inGroup(groupOperate, newConsole()), inGroup(groupOperate, newBench()),
		newVersion())
	return root
}

// The groups of kdelay --help.
const (
	groupRun     = "run"
	groupRecords = "records"
	groupOperate = "operate"
)

func inGroup(id string, cmd *cobra.Command) *cobra.Command {
	cmd.GroupID = id
	return cmd
}

// usageError is a mistake in the command line or the configuration: nothing
// was started, and the user has to change what they typed.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageArgs marks a failed argument check as a usage mistake.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// exitCode prints err, if any, and returns the process's exit status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	// errors.Join gives one problem per line: list them under one heading.
	if msg := err.Error(); strings.Contains(msg, "\n") {
		fmt.Fprintf(stderr, "kdelay:\n  %s\n", strings.ReplaceAll(msg, "\n", "\n  "))
	} else {
		fmt.Fprintf(stderr, "kdelay: %s\n", msg)
	}
	if errors.As(err, new(usageError)) || errors.As(err, new(bench.ConfigError)) {
		fmt.Fprintln(stderr, "Run 'kdelay --help' or 'kdelay <command> --help' for usage.")
		return 2
	}
	return 1
}
