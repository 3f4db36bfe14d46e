package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// TestBenchDelivery: the delivery a benchmark asks for is the
// one the forwarder under test runs, whether `kdelay serve` as a child or
// the forwarder in this process; none asked for leaves serve's default.
func TestBenchDelivery(t *testing.T) {
	t.Parallel()
	t.Run("a child kdelay serve gets --delivery", func(t *testing.T) {
		t.Parallel()
		flags := serveFlags(Setup{Delivery: forwarder.ExactlyOnce, Partitions: 1})
		if i := slices.Index(flags, "--delivery"); i < 0 || i+1 >= len(flags) || flags[i+1] != "exactly-once" {
			t.Errorf("serve flags %q, want --delivery exactly-once", flags)
		}
		if flags := serveFlags(Setup{Partitions: 1}); slices.Contains(flags, "--delivery") {
			t.Errorf("serve flags %q without a delivery, want no --delivery: serve's default", flags)
		}
	})
	t.Run("the forwarder in this process gets it", func(t *testing.T) {
		t.Parallel()
		if got := (Setup{Delivery: forwarder.ExactlyOnce}).forwarderConfig().Delivery; got != forwarder.ExactlyOnce {
			t.Errorf("forwarder delivery %q, want exactly-once", got)
		}
	})
	t.Run("a run defaults to at-least-once and sets it up", func(t *testing.T) {
		t.Parallel()
		c := Config{}.WithDefaults()
		if c.Delivery != forwarder.AtLeastOnce {
			t.Errorf("default delivery %q, want at-least-once", c.Delivery)
		}
		if got := (&cluster{}).forwarderSetup(&Config{Delivery: forwarder.ExactlyOnce}, "x", forwarder.ModeExact).Delivery; got != forwarder.ExactlyOnce {
			t.Errorf("setup delivery %q, want exactly-once", got)
		}
	})
	t.Run("exactly-once is read committed", func(t *testing.T) {
		t.Parallel()
		if len(readOpts(forwarder.AtLeastOnce)) != 0 || len(readOpts(forwarder.ExactlyOnce)) != 1 {
			t.Errorf("read options: %d at-least-once, %d exactly-once; want none, and the isolation level",
				len(readOpts(forwarder.AtLeastOnce)), len(readOpts(forwarder.ExactlyOnce)))
		}
	})
	t.Run("unknown delivery says the two", func(t *testing.T) {
		t.Parallel()
		want := `delivery: "once" is not a delivery; use "at-least-once" or "exactly-once"`
		for name, err := range map[string]error{
			"bench":  Config{Delivery: "once"}.WithDefaults().validate(),
			"faults": FaultConfig{Delivery: "once"}.WithDefaults().validate(),
			"scale":  ScaleConfig{Delivery: "once"}.WithDefaults().validate(),
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v, want %q", name, err, want)
			}
		}
	})
}

// TestFaultsDelivery: bench faults passes --delivery to every kdelay serve,
// and reads an exactly-once target read_committed, the only way its
// promise holds.
func TestFaultsDelivery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg           FaultConfig
		want          forwarder.Delivery
		readCommitted bool
	}{
		{FaultConfig{}, forwarder.AtLeastOnce, false},
		{FaultConfig{ReadCommitted: true}, forwarder.AtLeastOnce, true},
		{FaultConfig{Delivery: forwarder.ExactlyOnce}, forwarder.ExactlyOnce, true},
	}
	for _, tt := range tests {
		c := tt.cfg.WithDefaults()
		if c.Delivery != tt.want || c.ReadCommitted != tt.readCommitted || (len(c.collectorOpts()) == 1) != tt.readCommitted {
			t.Errorf("%+v: delivery %q, read committed %v (%s); want %q, %v", tt.cfg, c.Delivery, c.ReadCommitted, c.isolation(), tt.want, tt.readCommitted)
		}
	}
	r := &faultRun{cfg: &FaultConfig{Delivery: forwarder.ExactlyOnce}, sc: scenarioByName(ScenarioKill), name: "x"}
	if err := r.open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer r.teardown()
	flags := serveFlags(r.fleet.setup)
	if i := slices.Index(flags, "--delivery"); i < 0 || flags[i+1] != "exactly-once" {
		t.Errorf("every kdelay serve of a scenario gets %q, want --delivery exactly-once among them", flags)
	}
}

// TestRunExactlyOnce runs a tiny workload through a forwarder in exactly-once
// delivery, read committed: every record arrives once, none early, and the
// report says which delivery it measured.
func TestRunExactlyOnce(t *testing.T) {
	t.Parallel()
	set, err := levels.Parse([]string{"1s", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := tinyWorkload()
	w.Burst, w.Copy = 0, 100
	rep, err := Run(ctx, Config{
		Modes: []forwarder.Mode{forwarder.ModeExact}, Delivery: forwarder.ExactlyOnce,
		Levels: set, Workload: w, Partitions: 2, Grace: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Delivery != forwarder.ExactlyOnce {
		t.Errorf("report delivery %q, want exactly-once", rep.Delivery)
	}
	for _, g := range rep.Modes[0].Groups {
		if g.Delivered != g.Sent || g.Lost != 0 || g.Duplicates != 0 || g.Early != 0 {
			t.Errorf("%s: sent %d, delivered %d, lost %d, dups %d, early %d; want all delivered once, none early",
				g.Name, g.Sent, g.Delivered, g.Lost, g.Duplicates, g.Early)
		}
	}
	// 100 records commit in one transaction, so they arrive at once: no
	// rate to assert, only that the comparison ran.
	if rep.Copy == nil || rep.Copy.Records != 100 || len(rep.Copy.KdelayRuns) != 1 {
		t.Errorf("copy %+v, want one run of 100 records through kdelay", rep.Copy)
	}
	var table strings.Builder
	if err := WriteTable(&table, rep); err != nil || !strings.Contains(table.String(), "delivery exactly-once") {
		t.Errorf("table (%v) does not say delivery exactly-once:\n%s", err, table.String())
	}
}
