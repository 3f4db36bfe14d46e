package main

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/levels"
	"github.com/kdelay/kdelay/stages"
)

// embeddedConfig is serve's configuration on an embedded broker of the
// test's own, with settings as KDELAY_* variables.
func embeddedConfig(t *testing.T, env ...string) config.Config {
	t.Helper()
	cfg, err := config.Load(pflag.NewFlagSet("test", pflag.ContinueOnError), append([]string{
		"KDELAY_LISTEN=127.0.0.1:0", "KDELAY_DATA_DIR=" + t.TempDir(), "KDELAY_PARTITIONS=1", "KDELAY_ADMIN="}, env...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startTestBroker starts the embedded broker of cfg and closes it when the
// test ends; interval is its retention check interval.
func startTestBroker(t *testing.T, cfg config.Config, interval time.Duration) *embeddedBroker {
	t.Helper()
	b, err := startBroker(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	b.retention.interval = interval
	return b
}

// runBroker applies b's retention until the test ends, then closes b.
func runBroker(t *testing.T, b *embeddedBroker) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; b.Close() })
}

// startOffset is where topic's partition 0 starts: the broker has let go of
// every record before it.
func startOffset(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	starts, err := adm.ListStartOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := starts.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("start offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

// segmentBytesOnDisk is what topic's partition 0 keeps in data-dir's
// segment files.
func segmentBytesOnDisk(t *testing.T, dataDir, topic string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dataDir, "partitions", url.PathEscape(topic)+"-0", "*.dat"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestEmbeddedRetentionServe runs serve's forwarder on the embedded broker
// with a retention of 1s: the records of a delivered message leave memory
// and data-dir from the ingress, the level and the target, while a message
// due long after that waits in a level, hop after hop, and is delivered.
func TestEmbeddedRetentionServe(t *testing.T) {
	t.Parallel()
	cfg := embeddedConfig(t, "KDELAY_LEVELS=100ms,200ms", "KDELAY_RETENTION_HEADROOM=100ms", "KDELAY_RETENTION=1s")
	b := startTestBroker(t, cfg, 50*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	log := slog.New(slog.DiscardHandler)
	go func() {
		served <- server{cfg: cfg, log: log, kafkaLog: log, stderr: io.Discard}.forwardEmbedded(ctx, b)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	topics := kdelay.Topics{Prefix: cfg.TopicPrefix}
	const target = "orders"
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.DefaultProduceTopic(topics.Ingress()),
		kgo.ConsumeTopics(target), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	produce := func(r *kgo.Record) time.Time {
		// Bounded: if serve stopped, the ingress is never created, and
		// the client would wait for it for ever.
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		if err := cl.ProduceSync(sctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return r.Timestamp
	}
	send := func(value, delay string) time.Time {
		return produce(&kgo.Record{Value: []byte(value), Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(target)}, {Key: kdelay.HeaderDelay, Value: []byte(delay)}}})
	}
	// Written to the 100ms level as a hop would be: routed from the
	// ingress, a delay that ends on a level is held for its last one when
	// the ingress is a little slow, and never reaches the level.
	produce(&kgo.Record{Topic: topics.Level("100ms"), Value: []byte("now"), Headers: []kgo.RecordHeader{
		{Key: kdelay.HeaderTarget, Value: []byte(target)}, {Key: kdelay.HeaderID, Value: []byte("now")},
		{Key: kdelay.HeaderDeliverAt, Value: []byte(strconv.FormatInt(time.Now().Add(100*time.Millisecond).UnixMilli(), 10))}}})
	// Due well after the 10 s the test gives retention: on a busy machine
	// a 4 s one was delivered, and its records deleted, before the check.
	sentLate := send("late", "15s")
	due := sentLate.Add(15 * time.Second)

	var got []string
	deadline, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	for len(got) < 2 && deadline.Err() == nil {
		cl.PollFetches(deadline).EachRecord(func(r *kgo.Record) {
			got = append(got, string(r.Value))
			if string(r.Value) == "late" && r.Timestamp.Before(due) {
				t.Errorf("late delivered at %s, before it was due at %s", r.Timestamp, due)
			}
		})
		if len(got) == 1 {
			// "now" is delivered; "late" hops in the 200ms level meanwhile.
			gone := eventually(10*time.Second, func() bool {
				return startOffset(t, adm, target) == 1 && segmentBytesOnDisk(t, cfg.DataDir, target) == 0 &&
					startOffset(t, adm, topics.Level("100ms")) == 1
			})
			if !gone {
				t.Fatalf("10s after it was delivered, %s still starts at %d with %d bytes in data-dir, %s at %d; want them gone",
					target, startOffset(t, adm, target), segmentBytesOnDisk(t, cfg.DataDir, target),
					topics.Level("100ms"), startOffset(t, adm, topics.Level("100ms")))
			}
			if time.Now().After(due) {
				t.Fatalf("retention took until late was due: the test shows nothing")
			}
		}
	}
	if strings.Join(got, ",") != "now,late" {
		t.Fatalf("delivered %q; want now, then late: a record pending in a level outlives retention", got)
	}
	if s := startOffset(t, adm, topics.Ingress()); s == 0 {
		t.Errorf("the ingress starts at %d; want its records gone once handed on and expired", s)
	}
}

// TestEmbeddedRetention checks the rules retention applies on the embedded
// broker, with its default retention, after a restart from data-dir: records
// were written in the past, and the broker that took them closed before its
// retention ran.
//
// Each record is a batch of its own of about 1,070 bytes (1,000 bytes of
// value, uncompressed), so a retention.bytes of 2,000 holds two batches
// whole, and one is under it.
func TestEmbeddedRetention(t *testing.T) {
	t.Parallel()
	cfg := embeddedConfig(t)
	topics := kdelay.Topics{Prefix: cfg.TopicPrefix}
	expired, fresh := time.Now().Add(-2*cfg.Retention), time.Now()
	bytes := func(n string) map[string]*string { return map[string]*string{"retention.bytes": kadm.StringPtr(n)} }
	cases := []struct {
		name     string
		topic    string
		configs  map[string]*string
		written  []time.Time // one batch each
		commit   int64       // kdelay's group committed this offset; -1 for none
		wantFrom int64       // start offset after retention
	}{
		{"expired records deleted, from memory and data-dir", "orders", nil, []time.Time{expired, expired}, -1, 2},
		{"an expired record after a newer one waits for it, as in Kafka", "payments", nil, []time.Time{expired, fresh, expired, fresh}, -1, 1},
		{"the ingress keeps what kdelay has not handed on", topics.Ingress(), nil, []time.Time{expired, expired, expired}, 1, 1},
		{"a level keeps all while kdelay's group has no commit", topics.Level("1s"), nil, []time.Time{expired, expired}, -1, 0},
		{"a topic that only compacts keeps its records", "profiles", map[string]*string{"cleanup.policy": kadm.StringPtr("compact")},
			[]time.Time{expired}, -1, 0},
		{"retention.bytes deletes the oldest batches, never going under it, as Kafka", "clicks", bytes("2000"),
			[]time.Time{fresh, fresh, fresh, fresh}, -1, 2},
		{"retention.bytes 0 deletes every record, from memory and data-dir", "views", bytes("0"), []time.Time{fresh, fresh}, -1, 2},
		{"retention.bytes keeps what kdelay has not handed on", topics.Level("2s"), bytes("2000"),
			[]time.Time{fresh, fresh, fresh, fresh}, 1, 1},
	}

	ctx := context.Background()
	before := startTestBroker(t, cfg, time.Hour)
	cl, err := kgo.NewClient(kgo.SeedBrokers(before.Addrs()...), kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	value := make([]byte, 1000)
	for _, c := range cases {
		if _, err := adm.CreateTopic(ctx, 1, -1, c.configs, c.topic); err != nil {
			t.Fatal(err)
		}
		for i, ts := range c.written {
			r := &kgo.Record{Topic: c.topic, Key: []byte{byte(i)}, Value: value, Timestamp: ts}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if c.commit >= 0 {
			group := before.retention.groupOf(c.topic)
			offsets := kadm.Offsets{}
			offsets.AddOffset(c.topic, 0, c.commit, -1)
			if err := adm.CommitAllOffsets(ctx, group, offsets); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()
	before.Close()

	b := startTestBroker(t, cfg, 50*time.Millisecond)
	runBroker(t, b)
	cl, err = kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm = kadm.NewClient(cl)
	if !eventually(10*time.Second, func() bool { return startOffset(t, adm, "orders") == 2 }) {
		t.Fatalf("orders starts at %d after a restart; want 2, its expired records gone", startOffset(t, adm, "orders"))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := startOffset(t, adm, c.topic); got != c.wantFrom {
				t.Errorf("%s starts at %d; want %d", c.topic, got, c.wantFrom)
			}
			if c.wantFrom == int64(len(c.written)) {
				if n := segmentBytesOnDisk(t, cfg.DataDir, c.topic); n != 0 {
					t.Errorf("%s keeps %d bytes in data-dir; want its segment files deleted", c.topic, n)
				}
			}
		})
	}
}

// TestEmbeddedRetentionGroupNames pins the consumer group retention holds
// records for to the one the forwarder reads every topic with, in either
// delivery.
func TestEmbeddedRetentionGroupNames(t *testing.T) {
	t.Parallel()
	topics := kdelay.Topics{Prefix: "p"}
	set, err := levels.Parse([]string{"1s", "90m"})
	if err != nil {
		t.Fatal(err)
	}
	r := &retention{topics: topics, group: "g"}
	view := stages.Config{Topics: topics, Group: "g", Levels: set[:1]}
	dropped, _ := view.Dropped([]string{"p.level.90m"})
	want := map[string]string{"p.dlq": "", "p.control": "", "orders": "", "p.levelx": ""}
	for _, s := range append(view.Configured(), dropped...) {
		want[s.Topic] = s.Group
	}
	if len(want) != 7 {
		t.Fatalf("stages %v: want 3 topics read", want)
	}
	for topic, want := range want {
		if got := r.groupOf(topic); got != want {
			t.Errorf("groupOf(%q) = %q, want %q", topic, got, want)
		}
	}
}
