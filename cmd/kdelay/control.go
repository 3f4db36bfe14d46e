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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/fleet"
)

// afterDelivery is what every command's help says about a message delivered
// already: the question its user asks next is "did it work?".
const afterDelivery = `A command cannot undo a delivery already made. Whether the message was
delivered is known on its target topic, which then holds it with header
kdelay-id=ID; and kdelay logs command_unmatched with the id, and counts
kdelay_commands_total{result="unmatched"}, for a command that matched no record while
it was kept (the largest level plus retention-headroom).

The last command written for an ID is the one in force: a reschedule or
run-now after a cancel un-cancels the message, a cancel after them cancels it.
The command goes to <topic-prefix>.control, which kdelay serve creates.`

// commandFlags are what `kdelay reschedule` takes besides the id.
type commandFlags struct {
	delay, at string
}

func newCancel() *cobra.Command {
	return newCommand(kdelay.CommandCancel, nil, &cobra.Command{
		Use:   "cancel ID",
		Short: "Tell kdelay not to deliver the message with kdelay-id ID",
		Long: `Write a cancel command for the message with kdelay-id ID to the control
topic, wait for the broker to acknowledge it, and say so. kdelay then does not
deliver the message, wherever it is in its hops. ID is the id send printed
(id=...), the --id given to send, or the kdelay-id a client set.

` + afterDelivery,
		Example: `  kdelay cancel order-42
  kdelay cancel kdelay.ingress/3/17`,
	})
}

func newReschedule() *cobra.Command {
	var f commandFlags
	cmd := newCommand(kdelay.CommandReschedule, &f, &cobra.Command{
		Use:   "reschedule ID (--delay D | --at TIME)",
		Short: "Move the message with kdelay-id ID to a new due time, earlier or later",
		Long: `Write a reschedule command for the message with kdelay-id ID to the control
topic, wait for the broker to acknowledge it, and print the new due time.
kdelay then delivers the message once, at that time, and not at its old
time, whether the new one is earlier or later. --delay counts from now.

` + afterDelivery,
		Example: `  kdelay reschedule order-42 --delay 30s
  kdelay reschedule order-42 --at 2026-11-22T08:00:00Z`,
	})
	fl := cmd.Flags()
	fl.StringVar(&f.delay, "delay", "", "new delay from now: a Go duration (30s, 1h30m, 1500ms)")
	fl.StringVar(&f.at, "at", "", "new due time: RFC 3339 (2026-11-22T08:00:00Z) or unix epoch milliseconds")
	return cmd
}

func newRunNow() *cobra.Command {
	return newCommand(kdelay.CommandRunNow, nil, &cobra.Command{
		Use:   "run-now ID",
		Short: "Deliver the message with kdelay-id ID now, and not at its due time",
		Long: `Write a run-now command for the message with kdelay-id ID to the control
topic, wait for the broker to acknowledge it, and say so. kdelay then
delivers the message at once, and not again at its old time.

` + afterDelivery,
		Example: `  kdelay run-now order-42`,
	})
}

// newCommand completes cmd into the command that writes command name; f is
// reschedule's flags, nil for the others.
func newCommand(name string, f *commandFlags, cmd *cobra.Command) *cobra.Command {
	cmd.GroupID = groupRecords
	cmd.Args = usageArgs(oneID(name))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := config.Load(cmd.Flags(), os.Environ())
		if err != nil {
			return usageError{err}
		}
		var flags commandFlags // cancel and run-now take none
		if f != nil {
			flags = *f
		}
		rules := kdelay.Rules{Topics: kdelay.Topics{Prefix: cfg.TopicPrefix}, MaxDelay: cfg.MaxDelay}
		r, c, err := flags.record(name, args[0], rules, time.Now())
		if err != nil {
			return usageError{err}
		}
		return writeCommand(cmd.Context(), cfg, r, c, cmd.OutOrStdout())
	}
	if f != nil {
		config.AddClientFlags(cmd.Flags(), "max-delay") // a new due time beyond it is refused
	} else {
		config.AddClientFlags(cmd.Flags())
	}
	return cmd
}

// oneID checks that the command names the one message it is for.
func oneID(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) == 0 || len(args) == 1 && args[0] == "":
			return fmt.Errorf("give the kdelay-id of the message: kdelay %s ID, with the id send printed (id=...) or the --id you gave it", name)
		case len(args) > 1:
			return fmt.Errorf("give one id, not %d: kdelay %s ID, once per message", len(args), name)
		}
		return nil
	}
}

// record builds the command record with fleet.CommandRecord, once the flags
// are checked as a person typed them.
func (f commandFlags) record(name, id string, rules kdelay.Rules, now time.Time) (*kgo.Record, kdelay.Command, error) {
	if name == kdelay.CommandReschedule && (f.delay == "") == (f.at == "") {
		return nil, kdelay.Command{}, errors.New("set exactly one of --delay (e.g. 30s) and --at (e.g. 2026-11-22T08:00:00Z)")
	}
	if err := checkDueFlags(f.delay, f.at); err != nil {
		return nil, kdelay.Command{}, err
	}
	return fleet.CommandRecord(name, id, f.delay, f.at, rules, now)
}

// writeCommand produces r, waits for the acknowledgement and says what
// kdelay will do.
func writeCommand(ctx context.Context, cfg config.Config, r *kgo.Record, c kdelay.Command, out io.Writer) error {
	fl, err := openFleet(ctx, cfg)
	if errors.Is(err, context.Canceled) {
		return errors.New("interrupted before the command was sent: it was not written")
	} else if err != nil {
		return err
	}
	defer fl.Close()
	if err := fl.WriteCommand(ctx, r); err != nil {
		if missing := (*fleet.MissingTopicError)(nil); errors.As(err, &missing) {
			brokers := strings.Join(cfg.Seeds(), ",")
			return fmt.Errorf("topic %s does not exist on %s: kdelay serve creates it at start (a kdelay older than commands does not: upgrade it), or check --topic-prefix; "+
				"if you create kdelay's topics yourself, create it compacted: kafka-topics.sh --bootstrap-server %s --create --topic %s --config cleanup.policy=compact,delete",
				r.Topic, brokers, brokers, r.Topic)
		}
		return sendFailed(err, r.Topic, cfg.Seeds())
	}
	fmt.Fprintf(out, "%s %s: written to %s (partition %d, offset %d); %s\n", c.Name, c.ID, r.Topic, r.Partition, r.Offset, fleet.WillDo(c, r.Timestamp))
	fmt.Fprintf(out, "If %s was delivered already, this cannot undo it: its target topic holds it with header kdelay-id=%s, and kdelay logs command_unmatched when a command matched no record.\n", c.ID, c.ID)
	return nil
}
