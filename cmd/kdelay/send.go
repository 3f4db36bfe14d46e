package main

import (
	"cmp"
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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
)

// sendTimeout bounds how long send waits for the broker to acknowledge, once
// connect has found it answering.
const sendTimeout = 15 * time.Second

// sendFlags are what `kdelay send` puts on the record besides its value.
type sendFlags struct {
	target, delay, at, key, id string
	keySet, idSet              bool
	headers                    []string
}

func newSend() *cobra.Command {
	var f sendFlags
	cmd := &cobra.Command{
		Use:   "send --target TOPIC (--delay D | --at TIME) [--key K] [--header k=v]... [VALUE | -]",
		Short: "Write one delayed record to the ingress topic; print its id and due time",
		Long: `Write one record to <topic-prefix>.ingress with kdelay's headers, exactly as any
producer would, wait for the broker to acknowledge it, and print the id kdelay
gives it (the ingress topic/partition/offset, or --id) and when it is due.

The record's value is VALUE, or standard input when VALUE is - or is left out
and standard input is not a terminal, as with kcat. All of standard input is
one record; one trailing newline (as echo adds) is dropped.`,
		Example: `  kdelay send --target orders --delay 90s '{"order": 42}'
  kdelay send --target orders --at 2026-11-22T08:00:00Z --key 42 --header source=cli reminder
  echo '{"order": 42}' | kdelay send --target orders --delay 90s
  kdelay send --target orders --delay 1h - < order.json`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			value, err := sendValue(args, cmd.InOrStdin())
			if err != nil {
				return err
			}
			f.keySet, f.idSet = cmd.Flags().Changed("key"), cmd.Flags().Changed("id")
			rules := kdelay.Rules{Topics: kdelay.Topics{Prefix: cfg.TopicPrefix}, MaxDelay: cfg.MaxDelay}
			build := func(now time.Time) (*kgo.Record, time.Time, error) { return f.record(rules, value, now) }
			// Built now to refuse a mistake before anything connects, and
			// built again by send once the broker has answered.
			if _, _, err := build(time.Now()); err != nil {
				return usageError{err}
			}
			r, due, err := send(cmd.Context(), cfg, f.target, build, cmd.OutOrStdout())
			if err != nil {
				return err
			}
			// On standard error: standard output is the one line scripts read.
			if past := alreadyDue(due, r.Timestamp); past != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "kdelay: the due time %s: kdelay delivers the record now.\n", past)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.target, "target", "", "topic to deliver the record to (required)")
	fl.StringVar(&f.delay, "delay", "", "delay from now: a Go duration (90s, 1h30m, 1500ms)")
	fl.StringVar(&f.at, "at", "", "due time: RFC 3339 (2026-11-22T08:00:00Z) or unix epoch milliseconds")
	fl.StringVar(&f.key, "key", "", "record key")
	fl.StringVar(&f.id, "id", "", "id consumers dedupe by (default: the ingress record's topic/partition/offset)")
	fl.StringArrayVar(&f.headers, "header", nil, "header name=value to deliver with the record; repeatable")
	config.AddClientFlags(fl)
	return cmd
}

// sendValue is the record's value: VALUE, or standard input for "-" or for
// no VALUE when standard input is not a terminal (a pipe or a file). A
// person who typed no VALUE at a terminal forgot it: waiting for them to
// type the value and Ctrl-D would look like a hang.
func sendValue(args []string, stdin io.Reader) (string, error) {
	if len(args) == 1 && args[0] != "-" {
		return args[0], nil
	}
	if len(args) == 0 && isTerminal(stdin) {
		return "", usageError{errors.New("give the record's value as VALUE, or - to read it from standard input (echo hello | kdelay send ... -)")}
	}
	b, err := io.ReadAll(stdin)
	if err != nil {
		return "", fmt.Errorf("read the value from standard input: %w", err)
	}
	// "echo v | kdelay send" means the value v, as with kcat -P.
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	return s, nil
}

// isTerminal reports whether r is a character device: a terminal, or
// /dev/null, which a daemon or a CI job gets as standard input and which
// holds no value either.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// record builds the ingress record and its due time. Its timestamp is set
// here, to the millisecond Kafka keeps, because a delay counts from it. The
// record is checked with the server's own rules (kdelay.Parse), so a record
// kdelay would dead-letter is refused here with the same reason.
func (f sendFlags) record(rules kdelay.Rules, value string, now time.Time) (*kgo.Record, time.Time, error) {
	now = now.Truncate(time.Millisecond)
	switch {
	case f.target == "":
		return nil, time.Time{}, errors.New("--target is required: name the topic to deliver the record to")
	case (f.delay == "") == (f.at == ""):
		return nil, time.Time{}, errors.New("set exactly one of --delay (e.g. 90s) and --at (e.g. 2026-11-22T08:00:00Z)")
	}
	if err := checkDueFlags(f.delay, f.at); err != nil {
		return nil, time.Time{}, err
	}
	r := &kgo.Record{Topic: rules.Topics.Ingress(), Value: []byte(value), Timestamp: now}
	if f.keySet {
		r.Key = []byte(f.key)
	}
	for _, h := range f.headers {
		name, v, ok := strings.Cut(h, "=")
		switch {
		case !ok || name == "":
			return nil, time.Time{}, fmt.Errorf("--header %q is not name=value", h)
		case kdelay.IsRouting(name):
			return nil, time.Time{}, fmt.Errorf("--header %s: set it with --target, --delay, --at or --id instead", name)
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: name, Value: []byte(v)})
	}
	// The values go as the user wrote them: kdelay reads the same forms.
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: kdelay.HeaderTarget, Value: []byte(f.target)})
	if f.delay != "" {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: kdelay.HeaderDelay, Value: []byte(f.delay)})
	} else {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: []byte(f.at)})
	}
	if f.idSet {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: kdelay.HeaderID, Value: []byte(f.id)})
	}
	rt, _, err := kdelay.Parse(now, r.Headers, rules)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("kdelay would dead-letter this record: %w", err)
	}
	return r, rt.Due, nil
}

// send checks that target exists or that the broker creates it, builds the
// record with build, produces it, waits for the acknowledgement and prints
// the record's id and due time; it returns the record and its due time.
//
// The record is built once the broker has answered and the target is
// checked, and not before: a delay counts from the record's timestamp, and
// a timestamp taken before the connection would make the record as much
// older when kdelay reads it. Older by more than a second, it is planned
// from when it is read, and a delay of exactly a level no longer takes that
// level (forwarder's hopBase).
func send(ctx context.Context, cfg config.Config, target string, build func(now time.Time) (*kgo.Record, time.Time, error), out io.Writer) (*kgo.Record, time.Time, error) {
	cl, err := connect(ctx, cfg)
	if errors.Is(err, context.Canceled) {
		return nil, time.Time{}, errors.New("interrupted before the record was sent: it was not written")
	} else if err != nil {
		return nil, time.Time{}, err
	}
	defer cl.Close()
	brokers := strings.Join(cfg.Seeds(), ",")
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if missing(ctx, cl, target) {
		return nil, time.Time{}, fmt.Errorf("target topic %s does not exist on %s, and the broker does not create topics on first use: kdelay would dead-letter the record at its due time. "+
			"Create the topic first (kafka-topics.sh --bootstrap-server %s --create --topic %s), or let the broker create it (auto.create.topics.enable=true); nothing was written",
			target, brokers, brokers, target)
	}
	r, due, err := build(time.Now())
	if err != nil {
		return nil, time.Time{}, usageError{err}
	}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return nil, time.Time{}, sendFailed(err, r.Topic, cfg.Seeds())
	}
	id, _ := header(r, kdelay.HeaderID)
	id = cmp.Or(id, kdelay.Source(r.Topic, r.Partition, r.Offset))
	fmt.Fprintf(out, "id=%s due=%s in=%s\n", id, due.UTC().Format(timeFormat), max(time.Until(due), 0).Round(time.Millisecond))
	return r, due, nil
}

// missing reports whether the broker says that topic does not exist, once
// asked to create it on first use as kdelay's forwarders ask when they
// deliver: a broker with auto.create.topics.enable creates it now, and only
// one without it answers UNKNOWN_TOPIC_OR_PARTITION. Any other answer is not
// a no: a principal may not describe or create a topic that kdelay's own
// may write to (TOPIC_AUTHORIZATION_FAILED), a broker still creating it says
// LEADER_NOT_AVAILABLE, and a failed request fails the produce after it
// with its own reason.
func missing(ctx context.Context, cl *kgo.Client, topic string) bool {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return false
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic && errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.UnknownTopicOrPartition) {
			return true
		}
	}
	return false
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func sendFailed(err error, topic string, seeds []string) error {
	brokers := strings.Join(seeds, ",")
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no broker at %s acknowledged the record within %s: start kdelay serve, or point --brokers at your Kafka", brokers, sendTimeout)
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted before the broker acknowledged the record: it may or may not have been written")
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Errorf("send to %s on %s: %w; the broker's ACLs must allow kdelay's principal WRITE on %s", topic, brokers, err, topic)
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return fmt.Errorf("topic %s does not exist on %s: start kdelay serve first (it creates its topics), or check --topic-prefix", topic, brokers)
	}
	return fmt.Errorf("send to %s on %s: %w", topic, brokers, err)
}

// header returns the value of the first header called name.
func header(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}
