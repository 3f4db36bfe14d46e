package schedule

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/forwarder/forwardertest"
	"github.com/kdelay/kdelay/levels"
)

// TestUpgradeFromOwnGroup: a process of the version before 2026-11-30 runs
// its scheduler on a client and in a group of its own, "<group>.schedules".
// A process of this version, whose scheduler reads the schedules topic in
// the forwarders' group (AsReader), joins while it runs: its forwarders
// start, but its scheduler writes no occurrence while the old group has a
// member, since both would own every partition. Once the old process stops,
// the new one writes them: each occurrence arrives once, none is missing.
// oldMember waits until group has a member, for a minute of the bubble's
// clock at most.
func oldMember(t *testing.T, b *bubble, group string) {
	t.Helper()
	adm := kadm.NewClient(b.cl)
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		described, err := adm.DescribeGroups(context.Background(), group)
		if err == nil && len(described[group].Members) > 0 {
			return
		}
	}
	t.Fatalf("the old scheduler did not join %s within a minute", group)
}

func TestUpgradeFromOwnGroup(t *testing.T) {
	t.Parallel()
	inBubble(t, false, func(b *bubble) {
		t := b.t
		stopOld := b.run(b.cfg)
		// The old process is running once its scheduler is a member of
		// its group: started a moment before, it may still be joining,
		// and a group with no member yet is one the new process takes
		// (it failed so about once in ten runs).
		defaults := b.cfg.WithDefaults()
		oldMember(t, b, defaults.group())
		target := b.collect("")
		b.schedule("beat", []byte("b"), kdelay.HeaderSchedule, "0 * * * * *", kdelay.HeaderTarget, b.target)

		cfg := b.cfg
		cfg.AsReader, cfg.InstanceID = true, "new"
		s, err := New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		set, err := levels.Parse([]string{"1s", "10s", "1m"})
		if err != nil {
			t.Fatal(err)
		}
		forwardertest.Serve(t, forwarder.Config{Brokers: cfg.Brokers, ClientOpts: cfg.ClientOpts, Levels: set,
			Partitions: 3, InstanceID: "new", Readers: []forwarder.Reader{s.Reader()}, Logger: testLogger(t)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the new scheduler's Run: %v", err)
			}
		}()

		arrived(t, target, 2, 3*time.Minute) // 00:01 and 00:02, by the old process
		if n := s.Stats().Occurrences; n != 0 {
			t.Errorf("the new scheduler wrote %d occurrences while the old group had a member, want 0", n)
		}
		if err := stopOld(); err != nil {
			t.Errorf("the old scheduler's Run: %v", err)
		}
		got := arrived(t, target, 5, 4*time.Minute)
		if want := ids("beat", minute(1, 0), minute(2, 0), minute(3, 0), minute(4, 0), minute(5, 0)); !slices.Equal(got, want) {
			t.Errorf("ids %v, want %v: each once, none missing across the handover", got, want)
		}
		if s.Stats().Occurrences == 0 {
			t.Error("the new scheduler wrote no occurrence after the old one stopped")
		}
	})
}
