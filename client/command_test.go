package client_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/kafkago"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

// commander is a producer's Cancel, Reschedule and RunNow.
type commander interface {
	Cancel(ctx context.Context, id string) error
	Reschedule(ctx context.Context, id string, when client.Delay) error
	RunNow(ctx context.Context, id string) error
}

// commandCase is one command and the record the server must read from it,
// written at now.
type commandCase struct {
	name    string
	do      func(ctx context.Context, p commander, id string) error
	want    string        // kdelay.Command.Name
	due     time.Duration // after now; ignored for cancel
	headers []string      // as written, "key=value"
}

func commandCases(now time.Time) []commandCase {
	at := now.Add(90 * time.Minute)
	return []commandCase{
		{"cancel", func(ctx context.Context, p commander, id string) error { return p.Cancel(ctx, id) },
			kdelay.CommandCancel, 0, []string{"kdelay-command=cancel"}},
		{"reschedule after", func(ctx context.Context, p commander, id string) error {
			return p.Reschedule(ctx, id, client.After(30*time.Second))
		}, kdelay.CommandReschedule, 30 * time.Second,
			[]string{"kdelay-command=reschedule", "kdelay-deliver-at=" + kdelay.FormatDeliverAt(now.Add(30*time.Second))}},
		{"reschedule at", func(ctx context.Context, p commander, id string) error {
			return p.Reschedule(ctx, id, client.At(at))
		}, kdelay.CommandReschedule, 90 * time.Minute,
			[]string{"kdelay-command=reschedule", "kdelay-deliver-at=" + kdelay.FormatDeliverAt(at)}},
		{"run-now", func(ctx context.Context, p commander, id string) error { return p.RunNow(ctx, id) },
			kdelay.CommandRunNow, 0, []string{"kdelay-command=run-now"}},
	}
}

// Both libraries write each command as the same record, which
// kdelay.ParseCommand reads back as the command meant: key the id, an empty
// (not null) value, the header, the new due time, the time of the call.
func TestCommands(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	now := time.Now().Truncate(time.Millisecond)
	cfg := fx.cfg
	cfg.NowFunc = func() time.Time { return now }
	franz, err := client.NewProducer(context.Background(), fx.cluster.Client(kgo.ProducerLinger(0)), cfg)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	kafkaGo, err := kafkago.NewProducer(context.Background(), fx.writer(), cfg)
	if err != nil {
		t.Fatalf("kafkago.NewProducer: %v", err)
	}
	cases := commandCases(now)
	for _, lib := range []struct {
		name string
		p    commander
	}{{"franz-go", franz}, {"kafka-go", kafkaGo}} {
		for _, c := range cases {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := c.do(ctx, lib.p, lib.name+" "+c.name); err != nil {
				t.Fatalf("%s %s: %v", lib.name, c.name, err)
			}
			cancel()
		}
	}
	want := 2 * len(cases)
	// The commands, without kdelay's own records (keys from a NUL byte: the
	// running forwarder's membership notice, marks).
	commands := func(all []kafkatest.Arrival) []kafkatest.Arrival {
		return slices.DeleteFunc(slices.Clone(all), func(a kafkatest.Arrival) bool { return len(a.Key) > 0 && a.Key[0] == 0 })
	}
	got := commands(fx.cluster.Collect(cfg.Topics.Control()).Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(commands(got)) >= want }))
	if len(got) != want {
		t.Fatalf("%s holds %d records, want %d", cfg.Topics.Control(), len(got), want)
	}
	byKey := map[string]*kgo.Record{}
	for _, a := range got {
		byKey[string(a.Key)] = a.Record
	}
	for _, lib := range []string{"franz-go", "kafka-go"} {
		for _, c := range cases {
			id := lib + " " + c.name
			r := byKey[id]
			if r == nil {
				t.Errorf("%s: no record keyed %q in %s", id, id, cfg.Topics.Control())
				continue
			}
			if hs := headers(r); !slices.Equal(hs, c.headers) || r.Value == nil || len(r.Value) != 0 || !r.Timestamp.Equal(now) {
				t.Errorf("%s: headers %q, value %#v, timestamp %s; want headers %q, an empty non-null value, timestamp %s",
					id, hs, r.Value, r.Timestamp, c.headers, now)
			}
			cmd, err := kdelay.ParseCommand(r.Timestamp, r.Key, r.Headers, kdelay.Rules{Topics: cfg.Topics})
			wantDue := time.Time{}
			switch c.want {
			case kdelay.CommandReschedule:
				wantDue = now.Add(c.due)
			case kdelay.CommandRunNow:
				wantDue = now
			}
			if err != nil || cmd.ID != id || cmd.Name != c.want || !cmd.Due.Equal(wantDue) {
				t.Errorf("%s: ParseCommand = %+v, %v; want %s for %q due %s", id, cmd, err, c.want, id, wantDue)
			}
		}
	}
}

// A command the server would refuse fails before anything is written,
// saying what to fix.
func TestCommandsRefused(t *testing.T) {
	t.Parallel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1")) // never dialled: every case fails before producing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cfg := client.ProducerConfig{SkipTopicCheck: true}
	franz, err := client.NewProducer(context.Background(), cl, cfg)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	kafkaGo, err := kafkago.NewProducer(context.Background(), writerTo(t, "127.0.0.1:1"), cfg)
	if err != nil {
		t.Fatalf("kafkago.NewProducer: %v", err)
	}
	for _, c := range []struct {
		name string
		do   func(ctx context.Context, p commander) error
		want string
	}{
		{"cancel without an id", func(ctx context.Context, p commander) error { return p.Cancel(ctx, "") },
			`cancel "": the id is empty; pass the kdelay-id of the message`},
		{"run-now without an id", func(ctx context.Context, p commander) error { return p.RunNow(ctx, "") },
			`run-now "": the id is empty`},
		{"reschedule without an id", func(ctx context.Context, p commander) error { return p.Reschedule(ctx, "", client.After(time.Second)) },
			`reschedule "" after 1s: the id is empty`},
		{"an id kdelay keeps for itself", func(ctx context.Context, p commander) error { return p.Cancel(ctx, "\x00mark") },
			"starts with a NUL byte, which kdelay keeps for its own records"},
		{"a negative delay", func(ctx context.Context, p commander) error {
			return p.Reschedule(ctx, "order-42", client.After(-time.Second))
		},
			"negative delay; use After(0) to deliver now"},
		{"the zero time", func(ctx context.Context, p commander) error {
			return p.Reschedule(ctx, "order-42", client.At(time.Time{}))
		},
			"the zero time"},
		{"a delay beyond the maximum", func(ctx context.Context, p commander) error {
			return p.Reschedule(ctx, "order-42", client.After(401*24*time.Hour))
		}, "kdelay would refuse the command: kdelay-command reschedule: kdelay-deliver-at"},
	} {
		for _, lib := range []struct {
			name string
			p    commander
		}{{"franz-go", franz}, {"kafka-go", kafkaGo}} {
			t.Run(lib.name+" "+c.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := c.do(ctx, lib.p); err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("got %v, want an error saying %q", err, c.want)
				}
			})
		}
	}
}

// A server whose topics lack the control topic (one older than commands,
// or topics created by hand) fails NewProducer, saying how to get it, and a
// command when the check is skipped.
func TestCommandsWithoutControlTopic(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	set, err := levels.Parse([]string{"1s"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := client.ProducerConfig{Topics: kdelay.Topics{Prefix: name}, Levels: set}
	cluster.CreateTopic(cfg.Topics.Ingress(), 1, nil)
	cluster.CreateTopic(cfg.Topics.Level("1s"), 1, nil)
	want := "topic " + cfg.Topics.Control() + " does not exist: is kdelay running with topic prefix"
	fix := "kdelay serve creates " + cfg.Topics.Control() + " at start, and a kdelay older than commands has none: upgrade it, or create the topic with cleanup.policy=compact,delete"
	t.Run("NewProducer fails", func(t *testing.T) {
		_, err := client.NewProducer(context.Background(), cluster.Client(), cfg)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fix) {
			t.Errorf("NewProducer: %v, want an error saying %q and %q", err, want, fix)
		}
	})
	t.Run("kafkago.NewProducer fails", func(t *testing.T) {
		_, err := kafkago.NewProducer(context.Background(), writerTo(t, cluster.Brokers...), cfg)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fix) {
			t.Errorf("kafkago.NewProducer: %v, want an error saying %q and %q", err, want, fix)
		}
	})
	t.Run("Cancel fails when the check is skipped", func(t *testing.T) {
		skip := cfg
		skip.SkipTopicCheck = true
		p, err := client.NewProducer(context.Background(), cluster.Client(), skip)
		if err != nil {
			t.Fatalf("NewProducer: %v", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := p.Cancel(ctx, "order-42"); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fix) {
			t.Errorf("Cancel: %v, want an error saying %q and %q", err, want, fix)
		}
	})
}
