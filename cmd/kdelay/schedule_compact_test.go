package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/schedule"
)

// TestEmbeddedSchedulesCompacted runs serve's scheduler on the embedded
// broker, which does not compact, and replaces a schedule that fires every
// second 1,100 times, so that its partition of kdelay.schedules grows past
// what the scheduler compacts: the partition is cut, and after the broker
// and the scheduler restart from data-dir, the last replacement is in
// force and the schedule goes on, every occurrence written once.
func TestEmbeddedSchedulesCompacted(t *testing.T) {
	t.Parallel()
	cfg := embeddedConfig(t)
	topics := kdelay.Topics{Prefix: cfg.TopicPrefix}
	log := slog.New(slog.DiscardHandler)
	srv := server{cfg: cfg, log: log, kafkaLog: log, stderr: io.Discard}
	start := func() (b *embeddedBroker, adm *kadm.Client, stop func()) {
		b = startTestBroker(t, cfg, 50*time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		retained, scheduled := make(chan error, 1), make(chan error, 1)
		go func() { retained <- b.Run(ctx) }()
		// On a client of its own: no forwarder runs here to read for it.
		scfg := srv.schedulerConfig(b.Addrs())
		scfg.AsReader = false
		sched, err := schedule.New(scfg)
		if err != nil {
			t.Fatal(err)
		}
		go func() { scheduled <- sched.Run(ctx) }()
		cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
		if err != nil {
			t.Fatal(err)
		}
		stopped := false
		stop = func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-scheduled; err != nil {
				t.Errorf("scheduler: %v", err)
			}
			<-retained
			cl.Close()
			b.Close()
		}
		t.Cleanup(stop)
		return b, kadm.NewClient(cl), stop
	}

	b, adm, stop := start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The forwarder creates the ingress; here nothing else does.
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, topics.Ingress()); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	const replaces = compactAt
	var rs []*kgo.Record
	for i := range replaces + 1 {
		rs = append(rs, &kgo.Record{Topic: topics.Schedules(), Key: []byte("s"), Value: []byte(fmt.Sprint("v", i)), Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderSchedule, Value: []byte("@every 1s")}, {Key: kdelay.HeaderTarget, Value: []byte("beats")}}})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	cut := eventually(30*time.Second, func() bool { return startOffset(t, adm, topics.Schedules()) > 0 })
	before := startOffset(t, adm, topics.Schedules())
	if !cut {
		t.Fatalf("%s starts at %d after %d replacements; want it cut", topics.Schedules(), before, replaces)
	}
	stop()

	b, adm, _ = start()
	if s := startOffset(t, adm, topics.Schedules()); s < before {
		t.Errorf("%s starts at %d after a restart, want %d or more: the cut kept in data-dir", topics.Schedules(), s, before)
	}
	lc, err := kgo.NewClient(append(schedule.ListOpts(topics), kgo.SeedBrokers(b.Addrs()...))...)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	ls, err := schedule.List(ctx, lc, kdelay.Rules{Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint("v", replaces); len(ls) != 1 || string(ls[0].Value) != want || ls[0].Err != nil {
		t.Fatalf("listed %+v after the restart; want s, with its last value %s", ls, want)
	}
	restarted := time.Now()

	// The occurrences in the ingress, as the forwarder reads them: the
	// last a minute after the restart, every one once.
	ic, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...), kgo.ConsumeTopics(topics.Ingress()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	ids := map[string]int{}
	var last time.Time
	for ctx.Err() == nil && last.Before(restarted.Add(55*time.Second)) {
		ic.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			id := string(headerValue(r, kdelay.HeaderID))
			ids[id]++
			if at, err := time.Parse(time.RFC3339, id[strings.IndexByte(id, '@')+1:]); err == nil && at.After(last) {
				last = at
			}
		})
	}
	times := slices.Sorted(maps.Keys(ids))
	if len(times) < 60 || !everySecond(times) {
		t.Errorf("%d occurrences written, from %s to %s; want one a second, none skipped, to a minute after the restart", len(times), times[0], times[len(times)-1])
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("%s written %d times, want once", id, n)
		}
	}
}

// compactAt is more records than the scheduler lets a partition with one
// schedule hold before it compacts it (schedule/compact.go).
const compactAt = 1100

func headerValue(r *kgo.Record, key string) []byte {
	for _, h := range r.Headers {
		if h.Key == key {
			return h.Value
		}
	}
	return nil
}

// everySecond reports whether the occurrence ids, sorted, are a second
// apart.
func everySecond(ids []string) bool {
	var prev time.Time
	for _, id := range ids {
		at, err := time.Parse(time.RFC3339, id[strings.IndexByte(id, '@')+1:])
		if err != nil || !prev.IsZero() && at.Sub(prev) != time.Second {
			return false
		}
		prev = at
	}
	return true
}
