package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kdelay/kdelay/config"
)

// suggestFlag adds "did you mean --brokers?" to an unknown flag's error,
// with the command's flags closest to what was typed: cobra suggests no
// flag names.
func suggestFlag(cmd *cobra.Command, err error) error {
	var unknown *pflag.NotExistError
	if !errors.As(err, &unknown) || unknown.GetSpecifiedShortnames() != "" {
		return err // not an unknown --name: nothing to compare
	}
	names := closeFlags(cmd, unknown.GetSpecifiedName())
	if len(names) == 0 {
		return err
	}
	return fmt.Errorf("%w; did you mean --%s?", err, strings.Join(names, " or --"))
}

// closeFlags returns the names of cmd's flags close to typed, closest first.
func closeFlags(cmd *cobra.Command, typed string) []string {
	var names []string
	visit := func(f *pflag.Flag) { names = append(names, f.Name) }
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return config.Closest(typed, names)
}

// unknownCommand refuses a word after kdelay that names no command, and
// suggests the commands close to it: kdelay sned says did you mean send?
// cobra suggests only for a command whose Args is nil, and its message
// takes three lines; root's Args is this, so that a mistake exits 2.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath())
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if near := config.Closest(args[0], names); len(near) > 0 {
		return fmt.Errorf("%w; did you mean %s?", err, strings.Join(near, " or "))
	}
	return err
}
