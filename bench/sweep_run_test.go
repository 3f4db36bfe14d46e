package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kdelay/kdelay/levels"
)

// TestSweep runs a short sweep of two rates on an in-process kfake broker,
// each against a fresh forwarder in this process: every record due within
// a run arrives once and none early, the warm-up's apart from the judged,
// the floor beside them, the process read, and the report renders.
// Lateness depends on the machine: not asserted.
func TestSweep(t *testing.T) {
	t.Parallel()
	brokers, set := setupSweep(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := Sweep(ctx, SweepConfig{
		Brokers: brokers, Runner: InProcess{}, Rates: []int{80, 40},
		For: 3 * time.Second, Warmup: time.Second, MinDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second,
		Levels: set, Partitions: 2, Grace: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}

	t.Run("a row per rate, in order", func(t *testing.T) {
		if len(rep.Rows) != 2 || rep.Rows[0].Rate != 40 || rep.Rows[1].Rate != 80 {
			t.Fatalf("rows %+v, want 40/s then 80/s", rep.Rows)
		}
	})
	for _, r := range rep.Rows {
		t.Run(strconv.Itoa(r.Rate)+"/s", func(t *testing.T) {
			if r.Error != "" {
				t.Fatalf("the run ended early: %s", r.Error)
			}
			// Exactly the rate for 3s when on time; a writer late at the
			// very end leaves out the last.
			if want := int64(r.Rate) * 3; r.Sent > want || r.Sent < want*95/100 {
				t.Errorf("sent %d (%.1f/s), want %d, the rate for 3s", r.Sent, r.SentRate, want)
			}
			for _, g := range []Group{r.Judged, r.Warmup, r.Floor} {
				if g.Sent == 0 || g.Delivered != g.Sent || g.Duplicates != 0 || g.Early != 0 {
					t.Errorf("%s: %+v, want some records, each delivered once, none early", g.Name, g)
				}
			}
			if r.Lost != 0 || r.Early != 0 || r.Delivered != r.Judged.Sent+r.Warmup.Sent {
				t.Errorf("delivered %d, lost %d, early %d; want every record due within the run, none lost or early", r.Delivered, r.Lost, r.Early)
			}
			if p := r.Serve; !p.Shared || p.PeakRSS <= 0 || p.CPU < 0 || r.Broker != nil {
				t.Errorf("serve %+v, broker %+v: want this process read, shared, and no broker of its own", p, r.Broker)
			}
		})
	}
	t.Run("goals and outputs", func(t *testing.T) {
		for _, g := range rep.Goals {
			if strings.Contains(g.Name, "RSS") || strings.Contains(g.Name, "records") && !g.Met {
				t.Errorf("goal %+v: want no RSS goal in a shared process, and every record goal met", g)
			}
		}
		var table, csv, svg strings.Builder
		if err := WriteSweepTable(&table, rep); err != nil || !strings.Contains(table.String(), "40/s: p99 − floor p99") {
			t.Errorf("table: %v\n%s", err, table.String())
		}
		if err := WriteSweepCSV(&csv, rep); err != nil || strings.Count(csv.String(), "\n") != 3 {
			t.Errorf("CSV: %v, want a header and 2 rows:\n%s", err, csv.String())
		}
		if err := WriteSweepSVG(&svg, rep); err != nil || strings.Count(svg.String(), "<polyline") != 4 {
			t.Errorf("SVG: %v, want 4 lines", err)
		}
	})
}

// TestMaxRate measures the forwarding rate as --half-max does, over
// records enough to take several fetches, against a forwarder in this
// process.
func TestMaxRate(t *testing.T) {
	t.Parallel()
	brokers, set := setupSweep(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cfg := SweepConfig{Brokers: brokers, Runner: InProcess{}, MaxRecords: 20_000, Levels: set, Partitions: 2}.WithDefaults()
	rate, err := maxRate(ctx, &cfg)
	if err != nil || rate <= 0 {
		t.Errorf("maxRate: %g records/s, %v; want a rate", rate, err)
	}
}

// setupSweep starts a kfake broker that creates topics on first use, as
// kdelay serve's own does, and returns its address and the levels 1s and
// 2s.
func setupSweep(t *testing.T) ([]string, levels.Set) {
	t.Helper()
	set, err := levels.Parse([]string{"1s", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(2), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	return fake.ListenAddrs(), set
}
