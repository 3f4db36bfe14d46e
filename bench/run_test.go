package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tinyWorkload runs in a few seconds per mode: a few records per level on
// the 1s and 2s levels, a delay of two hops and a remainder, a short rate,
// a small burst and a small copy.
func tinyWorkload() Workload {
	return Workload{
		Levels: []string{"1s", "2s"}, PerLevel: 5,
		Delays: []time.Duration{3500 * time.Millisecond}, PerDelay: 4,
		Spread: 500 * time.Millisecond,
		Rate:   20, RateFor: 500 * time.Millisecond, RateDelay: time.Second,
		Burst: 50, BurstLead: time.Second,
		Copy: 200,
	}
}

// TestRun runs the tiny workload in both modes on the embedded broker and
// checks the report accounts for every record. It asserts counts, not
// timings: those depend on the machine.
func TestRun(t *testing.T) {
	t.Parallel()
	set, err := levels.Parse([]string{"1s", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Levels: set, Workload: tinyWorkload(), Partitions: 2, Grace: 5 * time.Second})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	t.Run("every record sent arrives once, none early", func(t *testing.T) {
		want := map[string]int64{
			"level=1s": 5, "level=2s": 5, "delay=3.5s": 4, "hops=1": 20, "hops=2": 4, GroupSingleHop: 10,
			GroupMultiHop: 4, GroupRate: 10, GroupSteady: 24, GroupBurst: 50, GroupFloor: 10,
		}
		if len(rep.Modes) != 2 || rep.Modes[0].Mode != forwarder.ModeExact || rep.Modes[1].Mode != forwarder.ModePoll {
			t.Fatalf("modes %v, want exact then poll", rep.Modes)
		}
		for _, m := range rep.Modes {
			if len(m.Groups) != len(want) {
				t.Errorf("%s: %d groups, want %d", m.Mode, len(m.Groups), len(want))
			}
			for _, g := range m.Groups {
				if g.Sent != want[g.Name] || g.Delivered != g.Sent || g.Lost != 0 || g.Duplicates != 0 || g.Early != 0 {
					t.Errorf("%s %s: sent %d, delivered %d, lost %d, dups %d, early %d; want %d sent, all delivered once, none early",
						m.Mode, g.Name, g.Sent, g.Delivered, g.Lost, g.Duplicates, g.Early, want[g.Name])
				}
				if g.P50 > g.P99 || g.P99 > g.Max {
					t.Errorf("%s %s: p50 %s, p99 %s, max %s are not in order", m.Mode, g.Name, g.P50, g.P99, g.Max)
				}
			}
			if !m.Usage.Measured || !m.Usage.Shared || m.Usage.CPU <= 0 {
				t.Errorf("%s: usage %+v, want measured on the shared process", m.Mode, m.Usage)
			}
		}
	})

	t.Run("copy and goals", func(t *testing.T) {
		if rep.Copy == nil || rep.Copy.Records != 200 {
			t.Errorf("copy %+v, want 200 records", rep.Copy)
		}
		if len(rep.Goals) != 8 {
			t.Errorf("%d goals, want 8: %+v", len(rep.Goals), rep.Goals)
		}
	})

	t.Run("outputs", func(t *testing.T) {
		var js bytes.Buffer
		if err := WriteJSON(&js, rep); err != nil {
			t.Fatal(err)
		}
		var back Report
		if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Modes) != 2 {
			t.Errorf("JSON does not read back: %v, %d modes", err, len(back.Modes))
		}
		var svg strings.Builder
		if err := WriteSVG(&svg, rep); err != nil || !strings.Contains(svg.String(), "delay=3.5s") {
			t.Errorf("SVG: %v, or no delay=3.5s in it", err)
		}
	})
}
