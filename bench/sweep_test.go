package bench

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// sweepRowAt is a row at rate whose writer kept up over 10s, its judged
// records late by p99 and max, the floor's by 1ms and 10ms, its kdelay
// serve at peak bytes of RSS.
func sweepRowAt(rate int, p99, maxLate time.Duration, peak int64) SweepRow {
	sent := int64(rate) * 10
	r := SweepRow{
		Rate:   rate,
		Judged: Group{Sent: sent * 7 / 10, Delivered: sent * 7 / 10, P50: p99 / 2, P99: p99, Max: maxLate},
		Warmup: Group{Sent: sent / 10, Delivered: sent / 10},
		Later:  Group{Sent: sent - sent*7/10 - sent/10},
		Floor:  Group{Sent: sent / 20, Delivered: sent / 20, P50: time.Millisecond / 2, P99: time.Millisecond, Max: 10 * time.Millisecond},
		Serve:  SweepProc{PeakRSS: peak, CPU: 12.5},
	}
	r.derive(10 * time.Second)
	return r
}

func TestSweepRowDerive(t *testing.T) {
	t.Parallel()
	t.Run("totals of the records due within the run, any record's early and duplicates", func(t *testing.T) {
		t.Parallel()
		r := SweepRow{
			Rate:   100,
			Judged: Group{Sent: 700, Delivered: 698, Lost: 2, Early: 1, Duplicates: 3, P99: 9 * time.Millisecond, Max: 70 * time.Millisecond},
			Warmup: Group{Sent: 100, Delivered: 99, Lost: 1, Duplicates: 1},
			Later:  Group{Sent: 200, Delivered: 50, Lost: 150, Early: 2}, // pending, not lost
			Floor:  Group{Sent: 70, Delivered: 70, P99: 4 * time.Millisecond, Max: 30 * time.Millisecond},
		}
		r.derive(10 * time.Second)
		got := [...]int64{r.Sent, r.Delivered, r.Lost, r.Early, r.Duplicates, r.Later.Lost}
		if want := [...]int64{1000, 797, 3, 3, 4, 0}; got != want {
			t.Errorf("sent, delivered, lost, early, dups, later's lost = %v, want %v", got, want)
		}
		if r.SentRate != 100 || !r.KeptUp() {
			t.Errorf("sent %.1f/s, kept up %t; want 100/s, kept up", r.SentRate, r.KeptUp())
		}
		if r.P99OverFloor != 5*time.Millisecond || r.MaxOverFloor != 40*time.Millisecond {
			t.Errorf("p99 − floor %s, max − floor %s; want 5ms and 40ms", r.P99OverFloor, r.MaxOverFloor)
		}
	})
	t.Run("a writer that fell behind", func(t *testing.T) {
		t.Parallel()
		r := SweepRow{Rate: 50000, Judged: Group{Sent: 900_000}}
		r.derive(30 * time.Second)
		if r.SentRate != 30000 || r.KeptUp() {
			t.Errorf("sent %.1f/s, kept up %t; want 30000/s, not kept up", r.SentRate, r.KeptUp())
		}
	})
	t.Run("derived twice, the same", func(t *testing.T) {
		t.Parallel()
		r := sweepRowAt(1000, 3*time.Millisecond, 20*time.Millisecond, 40<<20)
		once := r
		r.derive(10 * time.Second)
		if r != once {
			t.Errorf("derived again: %+v, want %+v", r, once)
		}
	})
}

// TestSweepGoals: each rate is judged on its own, lateness beside the
// floor, peak RSS only of a process of its own.
func TestSweepGoals(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name   string
		row    SweepRow
		missed []string // names of the goals missed
	}{
		{"at the floor, within memory", sweepRowAt(1000, 5*ms, 59*ms, 100<<20), nil},
		{"p99 6ms above the floor", sweepRowAt(1000, 7*ms, 20*ms, 100<<20), []string{"1000/s: p99 − floor p99"}},
		{"max 51ms above the floor", sweepRowAt(1000, 2*ms, 61*ms, 100<<20), []string{"1000/s: max − floor max"}},
		{"over 128 MiB", sweepRowAt(1000, 2*ms, 20*ms, 129<<20), []string{"1000/s: peak RSS of kdelay serve"}},
		{"in the benchmark's process: RSS not judged", func() SweepRow {
			r := sweepRowAt(1000, 2*ms, 20*ms, 900<<20)
			r.Serve.Shared = true
			return r
		}(), nil},
		{"lost and early", func() SweepRow {
			r := sweepRowAt(1000, 2*ms, 20*ms, 100<<20)
			r.Judged.Lost, r.Warmup.Early = 1, 1
			r.derive(10 * time.Second)
			return r
		}(), []string{"1000/s: lost records", "1000/s: early records"}},
		{"nothing judged", func() SweepRow {
			r := SweepRow{Rate: 1000, Serve: SweepProc{PeakRSS: -1, CPU: -1}}
			r.derive(10 * time.Second)
			return r
		}(), []string{"1000/s: p99 − floor p99", "1000/s: max − floor max"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var missed []string
			for _, g := range sweepGoals([]SweepRow{tt.row}, sweepP99OverFloor, sweepMaxOverFloor) {
				if !g.Met {
					missed = append(missed, g.Name)
				}
			}
			if strings.Join(missed, "; ") != strings.Join(tt.missed, "; ") {
				t.Errorf("missed %q, want %q", missed, tt.missed)
			}
		})
	}
	t.Run("looser limits, as CI judges", func(t *testing.T) {
		t.Parallel()
		r := sweepRowAt(5000, 90*ms, 400*ms, 100<<20)
		for _, g := range sweepGoals([]SweepRow{r}, 100*ms, 500*ms) {
			if !g.Met {
				t.Errorf("%s: got %s, want %s: missed within the limits given", g.Name, g.Got, g.Want)
			}
		}
		late := sweepRowAt(5000, 1700*ms, 3000*ms, 100<<20)
		var missed int
		for _, g := range sweepGoals([]SweepRow{late}, 100*ms, 500*ms) {
			if !g.Met {
				missed++
			}
		}
		if missed != 2 {
			t.Errorf("seconds above the floor missed %d goals, want 2 (p99 and max)", missed)
		}
	})
	t.Run("a run that ended early fails the report", func(t *testing.T) {
		t.Parallel()
		r := sweepRowAt(1000, 2*ms, 20*ms, 100<<20)
		rep := &SweepReport{Rows: []SweepRow{r}, Goals: sweepGoals([]SweepRow{r}, sweepP99OverFloor, sweepMaxOverFloor)}
		if !rep.Met() {
			t.Fatalf("goals %+v not met", rep.Goals)
		}
		rep.Rows[0].Error = "kdelay serve exited"
		if rep.Met() {
			t.Errorf("met with a row that ended early")
		}
	})
}

func TestSweepConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  SweepConfig
		want string // in the error; "" for none
	}{
		{"defaults", SweepConfig{}, ""},
		{"a rate of 0", SweepConfig{Rates: []int{1000, 0}}, "rates: 0; use at least 1 record per second"},
		{"a running kdelay serve", SweepConfig{Runner: Running{}}, "cannot be started afresh for each rate"},
		{"a warm-up as long as the run", SweepConfig{For: 5 * time.Second, Warmup: 5 * time.Second}, "a warm-up shorter than for"},
		{"delays the wrong way round", SweepConfig{MinDelay: time.Second, MaxDelay: time.Millisecond}, "use 0 < min-delay ≤ max-delay"},
		{"half-max over no record", SweepConfig{HalfMax: true, MaxRecords: -1}, "max-records: -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.WithDefaults().validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("validate: %v, want %q", err, tt.want)
			}
		})
	}
	t.Run("rates in order, each once, half the maximum among them", func(t *testing.T) {
		t.Parallel()
		got := sortedRates([]int{5000, 1000, halfRate(10001), 1000})
		if want := []int{1000, 5000}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("rates %v, want %v", got, want)
		}
		if halfRate(0.5) != 1 {
			t.Errorf("half of 0.5/s is %d, want at least 1", halfRate(0.5))
		}
	})
}

// TestProcWatch: the peak is the highest mark read or left at exit; CPU
// counts from the first read at or after the warm-up to the last.
func TestProcWatch(t *testing.T) {
	t.Parallel()
	w := &procWatch{from: time.Second, peak: 50 << 20, reads: 3,
		first: cpuRead{at: time.Second, cpu: 100 * time.Millisecond}, last: cpuRead{at: 3 * time.Second, cpu: 600 * time.Millisecond}}
	if p := w.figures(Usage{PeakRSS: 60 << 20}); p.PeakRSS != 60<<20 || p.CPU != 25 {
		t.Errorf("figures %+v, want peak 60 MiB (at exit) and 25%% (0.5s of CPU over 2s)", p)
	}
	if p := w.figures(Usage{}); p.PeakRSS != 50<<20 {
		t.Errorf("peak %d, want the 50 MiB read while it ran", p.PeakRSS)
	}
	var none *procWatch
	if p := none.figures(Usage{}); p.PeakRSS != -1 || p.CPU != -1 {
		t.Errorf("figures of no process %+v, want -1, unread", p)
	}
	if p := (&procWatch{reads: 1}).figures(Usage{}); p.CPU != -1 {
		t.Errorf("CPU from one read: %g, want -1, unread", p.CPU)
	}
}

func TestSweepRender(t *testing.T) {
	t.Parallel()
	behind := sweepRowAt(50000, 900*time.Millisecond, 2*time.Second, 140<<20)
	behind.Judged.Sent /= 2
	behind.derive(10 * time.Second)
	rows := []SweepRow{sweepRowAt(1000, 2*time.Millisecond, 20*time.Millisecond, 40<<20), behind}
	rows[1].Broker = &SweepProc{PeakRSS: 300 << 20, CPU: 80}
	rep := &SweepReport{ServeRun: ServeRun{Broker: "embedded"}, Embedded: true, For: 10 * time.Second, Warmup: 5 * time.Second, Rows: rows, Goals: sweepGoals(rows, sweepP99OverFloor, sweepMaxOverFloor)}

	t.Run("table: a row per rate, the writer's lag, the goals", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		if err := WriteSweepTable(&b, rep); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"P99−FLOOR", "BROKER CPU %", "The writer did not keep up at 50000/s", "50000/s: peak RSS of kdelay serve", "300.0"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("table has no %q:\n%s", want, b.String())
			}
		}
	})
	t.Run("CSV: a header and a row per rate", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		if err := WriteSweepCSV(&b, rep); err != nil || strings.Count(b.String(), "\n") != 3 {
			t.Errorf("CSV: %v, want 3 lines:\n%s", err, b.String())
		}
	})
	t.Run("JSON reads back", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		var back SweepReport
		if err := WriteSweepJSON(&b, rep); err != nil || json.Unmarshal([]byte(b.String()), &back) != nil || len(back.Rows) != 2 || back.Rows[1].Broker.CPU != 80 {
			t.Errorf("JSON: %v:\n%s", err, b.String())
		}
	})
	t.Run("SVG: three lines of lateness, one of RSS, the goal's line", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		if err := WriteSweepSVG(&b, rep); err != nil {
			t.Fatal(err)
		}
		svg := b.String()
		if strings.Count(svg, "<polyline") != 4 || !strings.Contains(svg, "goal ≤ 128 MB") || !strings.Contains(svg, ">50k<") {
			t.Errorf("SVG without 4 lines, the goal and the rate 50k:\n%s", svg)
		}
	})
	t.Run("SVG of a sweep with nothing judged", func(t *testing.T) {
		t.Parallel()
		var b strings.Builder
		if err := WriteSweepSVG(&b, &SweepReport{Rows: []SweepRow{{Rate: 1000}}}); err != nil || strings.Contains(b.String(), "NaN") {
			t.Errorf("SVG: %v\n%s", err, b.String())
		}
	})
}
