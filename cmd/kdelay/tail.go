package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/fleet"
)

func newTail() *cobra.Command {
	var fromBeginning bool
	cmd := &cobra.Command{
		Use:   "tail TOPIC",
		Short: "Print records as they reach a topic, with how late each is",
		Long: `Print each record that reaches TOPIC on one line: its timestamp, partition/offset,
lateness against its kdelay-deliver-at header ("late 2.3ms", "EARLY 5ms", or "-"
without the header), key, value and headers. Stop with Ctrl-C.

Times and lateness come from the record's own timestamp on TOPIC, not from when
tail read it, so records printed with --from-beginning are as late as they were.
For a record kdelay delivered, the timestamp is when kdelay produced it to TOPIC
(or when the broker appended it, if TOPIC has message.timestamp.type=LogAppendTime),
in milliseconds: "late <1ms" is within the millisecond after the due time.

Without --from-beginning it prints records written from now on, including those of
partitions or a topic created later.`,
		Example: "  kdelay tail orders\n  kdelay tail --from-beginning kdelay.dlq",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			start := kgo.NewOffset().AfterMilli(time.Now().UnixMilli())
			if fromBeginning {
				start = kgo.NewOffset().AtStart()
			}
			return tail(cmd.Context(), cfg, args[0], start, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().BoolVar(&fromBeginning, "from-beginning", false, "print the records already in the topic first")
	config.AddClientFlags(cmd.Flags())
	return cmd
}

// tail prints the records of topic from start until ctx ends, and on
// progress that it waits for the topic if it does not exist yet.
func tail(ctx context.Context, cfg config.Config, topic string, start kgo.Offset, out, progress io.Writer) error {
	cl, err := connect(ctx, cfg,
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(start),
		// Notice a topic created after tail started within a second.
		kgo.MetadataMinAge(time.Second),
	)
	if errors.Is(err, context.Canceled) {
		return nil // Ctrl-C before the broker answered
	} else if err != nil {
		return err
	}
	defer cl.Close()
	sayIfMissing(ctx, cl, topic, cfg.Seeds(), progress)
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := fleet.FetchErr(fetches); err != nil {
			return err
		}
		fetches.EachRecord(func(r *kgo.Record) { fmt.Fprintln(out, line(r)) })
	}
}

// sayIfMissing says once that topic does not exist yet. The consumer waits
// for it without a word (it neither creates the topic nor reports it
// missing), so a misspelt name would look like a topic nothing reaches.
// Whether it is created later, by a producer on a broker that creates
// topics on first use or by hand, the consumer then reads it.
func sayIfMissing(ctx context.Context, cl *kgo.Client, topic string, seeds []string, progress io.Writer) {
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return // the consumer meets the same failure and reports it
	}
	if td, ok := topics[topic]; ok && !errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return
	}
	fmt.Fprintf(progress, "kdelay: topic %s does not exist on %s yet: waiting for it to be created (Ctrl-C to stop)\n", topic, strings.Join(seeds, ","))
}

// line is one record as tail prints it:
//
//	11:30:01.503  0/17  late 2.3ms  key="k"  value="hello"  trace=1 kdelay-id=kdelay.ingress/0/5
//
// The time is the record's timestamp, which the broker keeps: when tail reads
// the record (seconds later with --from-beginning) says nothing about when
// it was delivered.
func line(r *kgo.Record) string {
	hs := make([]string, 0, len(r.Headers))
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+quoteIfNeeded(h.Value))
	}
	return fmt.Sprintf("%s  %d/%d  %-12s  key=%s  value=%s  %s",
		r.Timestamp.Format("15:04:05.000"), r.Partition, r.Offset, lateness(r),
		quote(r.Key), quote(r.Value), strings.Join(hs, " "))
}

// lateness compares the record's timestamp with kdelay-deliver-at.
func lateness(r *kgo.Record) string {
	v, ok := header(r, kdelay.HeaderDeliverAt)
	if !ok {
		return "-"
	}
	due, err := kdelay.ParseDeliverAt(v)
	if err != nil {
		return "-"
	}
	// Kafka keeps timestamps in milliseconds: a record produced within the
	// millisecond after its due time has the due time's timestamp.
	switch late := r.Timestamp.Sub(due); {
	case late < 0:
		return "EARLY " + short(-late)
	case late < time.Millisecond:
		return "late <1ms"
	default:
		return "late " + short(late)
	}
}

// short rounds d to about three significant digits: 2.3ms, 1.24s.
func short(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// quote writes a key or value so that it stays on one line; "-" for null.
func quote(b []byte) string {
	if b == nil {
		return "-"
	}
	return strconv.Quote(string(b))
}

// quoteIfNeeded quotes a header value only when it has spaces or characters
// that do not print.
func quoteIfNeeded(b []byte) string {
	s := string(b)
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '"' }) < 0 {
		return s
	}
	return strconv.Quote(s)
}
