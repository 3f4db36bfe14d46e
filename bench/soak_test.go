package bench

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// sawtooth is a heap's shape between collections: it climbs from 0 to
// height over period, then drops, sampled at t hours.
func sawtooth(t, height float64, period time.Duration) float64 {
	p := period.Hours()
	return height * math.Mod(t, p) / p
}

// hourOfSamples are sample times every 10 s over an hour, in hours, and a
// value for each.
func hourOfSamples(y func(t float64) float64) (ts, ys []float64) {
	for at := 6 * time.Minute; at <= time.Hour; at += 10 * time.Second {
		ts, ys = append(ts, at.Hours()), append(ys, y(at.Hours()))
	}
	return ts, ys
}

// TestTheilSen: the fitted slope is the line's, is not tilted by a spike
// near an end, and the noise covers what a sawtooth sampled at a drifting
// phase adds, not a leak beneath it.
func TestTheilSen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		y         func(t float64) float64 // MB at t hours
		slope     float64                 // MB/h the fit should find, within its noise
		noiseOver float64                 // the noise should be at most this
	}{
		{"a straight line", func(t float64) float64 { return 10 + 2*t }, 2, 1e-9},
		{"flat under a sawtooth of 30 MB", func(t float64) float64 { return 20 + sawtooth(t, 30, 37*time.Second) }, 0, 10},
		{"flat with a spike of 60 MB at the end", func(t float64) float64 {
			if t == 1 {
				return 80
			}
			return 20
		}, 0, 1e-9},
		{"a leak of 50 MB/h under the sawtooth", func(t float64) float64 { return 20 + 50*t + sawtooth(t, 30, 37*time.Second) }, 50, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ts, ys := hourOfSamples(tt.y)
			f := theilSen(ts, ys)
			if math.Abs(f.slope-tt.slope) > f.noise+1e-9 || f.noise > tt.noiseOver {
				t.Errorf("slope %.3f ± %.3f MB/h, want %.3f within the noise, and noise at most %g", f.slope, f.noise, tt.slope, tt.noiseOver)
			}
		})
	}
	t.Run("a slow wander widens the noise", func(t *testing.T) {
		t.Parallel()
		// A wave of half an hour: each sample near the one before, so the
		// hour holds few independent ones (ρ clamped at 0.9: ×√19), and
		// its part-periods tilt the fit.
		wave := func(t float64) float64 { return 20 + 3*math.Sin(2*math.Pi*t/0.5) }
		ts, ys := hourOfSamples(wave)
		f := theilSen(ts, ys)
		independent := f.noise / math.Sqrt(19)
		if math.Abs(f.slope) > f.noise || math.Abs(f.slope) < independent {
			t.Errorf("slope %.3f ± %.3f MB/h: want 0 within the noise, and outside the %.3f independent samples would claim", f.slope, f.noise, independent)
		}
	})
	t.Run("intercept", func(t *testing.T) {
		t.Parallel()
		if f := theilSen([]float64{1, 2, 3, 4, 5}, []float64{12, 14, 16, 18, 20}); f.intercept != 10 || f.slope != 2 {
			t.Errorf("fit %+v, want intercept 10, slope 2", f)
		}
	})
	t.Run("thinned past maxSlopePoints", func(t *testing.T) {
		t.Parallel()
		var ts, ys []float64
		for i := range 3 * maxSlopePoints {
			ts, ys = append(ts, float64(i)), append(ys, 3*float64(i))
		}
		if f := theilSen(ts, ys); f.slope != 3 {
			t.Errorf("slope %g, want 3", f.slope)
		}
	})
}

func TestLag1(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{1, 1, 1, -1, -1, -1}, 3.0 / 6},
		{[]float64{1, -1, 1, -1}, -3.0 / 4},
		{[]float64{0, 0, 0}, 0},
		{nil, 0},
	} {
		if got := lag1(tt.xs); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("lag1(%v) = %g, want %g", tt.xs, got, tt.want)
		}
	}
}

// TestGrowthGoal: growth is judged beyond the noise of the run, the limit
// itself included.
func TestGrowthGoal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		perHour, noise float64
		got            string
		met            bool
	}{
		{"under the limit", 0.5, 0.2, "0.50 ± 0.20 MB/h", true},
		{"over the limit, within the noise of a short run", 5, 10, "5.00 ± 10.00 MB/h", true},
		{"over the limit by exactly the noise", 3, 2, "3.00 ± 2.00 MB/h", true},
		{"over the limit beyond the noise: a leak", 50, 10, "50.00 ± 10.00 MB/h", false},
		{"shrinking", -4, 1, "-4.00 ± 1.00 MB/h", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := growthGoal(Trend{Name: TrendHeapLive, PerHour: tt.perHour, Noise: tt.noise}, 1)
			if g.Name != "live heap growth after warm-up" || g.Want != "≤ 1 MB/h" || g.Got != tt.got || g.Met != tt.met {
				t.Errorf("goal %+v, want got %q, met %v", g, tt.got, tt.met)
			}
		})
	}
}

// TestSoakGoals: memory goals on the kdelay serve's RSS and live heap only
// (not the broker's), early records counted in every group, lost ones only
// among those due within the run.
func TestSoakGoals(t *testing.T) {
	t.Parallel()
	rep := &SoakReport{
		MaxGrowth: 1,
		Trends: []Trend{
			{Name: TrendRSS, PerHour: 0.4, Noise: 1}, {Name: TrendHeapInuse, PerHour: 900, Noise: 1},
			{Name: TrendHeapLive, PerHour: 60, Noise: 5}, {Name: "broker " + TrendHeapLive, PerHour: 1400, Noise: 10},
		},
		Groups: []Group{
			{Name: GroupDueInRun, Sent: 10, Delivered: 9, Lost: 1},
			{Name: GroupDueLater, Sent: 5, Delivered: 1, Early: 1},
			{Name: GroupFloor, Sent: 2, Delivered: 2},
		},
	}
	want := []Goal{
		{"RSS growth after warm-up", "≤ 1 MB/h", "0.40 ± 1.00 MB/h", true},
		{"live heap growth after warm-up", "≤ 1 MB/h", "60.00 ± 5.00 MB/h", false},
		{"early records", "0", "1", false},
		{"lost records (due within the run)", "0", "1", false},
	}
	got := soakGoals(rep)
	if len(got) != len(want) {
		t.Fatalf("goals %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("goal %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	rep.Goals = got
	if rep.Met() {
		t.Error("Met with goals missed")
	}
}

// proc is a ProcSample with the given memory in MB and CPU so far.
func proc(rss, live float64, cpu time.Duration) ProcSample {
	p := unread()
	p.RSS, p.HeapInuse, p.HeapLive = int64(rss*(1<<20)), int64(2*live*(1<<20)), int64(live*(1<<20))
	p.Goroutines, p.OpenFDs, p.CPU = 100, 40, cpu
	return p
}

// TestTrends: slopes are fitted after the warm-up only, a sample's missing
// figure is skipped, and a figure with too few samples gets no trend.
func TestTrends(t *testing.T) {
	t.Parallel()
	var samples []SoakSample
	for i := range 13 {
		at := time.Duration(i) * 10 * time.Second
		s := SoakSample{At: at, Serve: proc(50+float64(i), 10, at/4), Late: Window{N: 5, P99: 3 * time.Millisecond}}
		if i < 3 {
			s.Serve.RSS = 1 << 30 // the warm-up: left out
		}
		if i == 7 {
			s.Serve = unread() // /metrics not read
		}
		samples = append(samples, s)
	}
	got := map[string]Trend{}
	for _, tr := range trends(samples, 30*time.Second) {
		got[tr.Name] = tr
	}
	// RSS: an exact line, whose noise is only what RSS settles by, over
	// the 90 s fitted.
	rss := got[TrendRSS]
	if rss.Samples != 9 || rss.First != 53 || rss.Last != 62 || math.Abs(rss.PerHour-360) > 1e-6 || math.Abs(rss.Noise-rssSettle*40) > 1e-6 {
		t.Errorf("RSS trend %+v, want 9 samples from 53 to 62 MB, 360 MB/h exactly, noise %g MB over 90 s", rss, rssSettle)
	}
	if live := got[TrendHeapLive]; live.Noise != 0 {
		t.Errorf("live heap trend %+v, want noise 0: it is level, and does not settle", live)
	}
	if cpu := got["CPU"]; cpu.Samples != 8 || math.Abs(cpu.First-25) > 1e-9 || math.Abs(cpu.PerHour) > 1e-6 {
		t.Errorf("CPU trend %+v, want 8 samples (none beside the unread one) of 25%%, flat", cpu)
	}
	if p99 := got["p99 lateness"]; p99.Samples != 10 || p99.First != 3 {
		t.Errorf("p99 lateness trend %+v, want 10 samples of 3 ms", p99)
	}
	for _, absent := range []string{"TCP connections", "broker " + TrendRSS, TrendBrokerLog} {
		if _, ok := got[absent]; ok {
			t.Errorf("a trend of %s, which no sample has", absent)
		}
	}
}

func TestPromValues(t *testing.T) {
	t.Parallel()
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 445
go_gc_duration_seconds{quantile="0"} 2.1e-05
go_gc_heap_live_bytes 3.240888e+06
process_open_fds 179 1790000000000
`
	t.Run("the named unlabelled series", func(t *testing.T) {
		t.Parallel()
		got, err := promValues(strings.NewReader(text), "go_goroutines", "go_gc_heap_live_bytes", "process_open_fds")
		if err != nil || got["go_goroutines"] != 445 || got["go_gc_heap_live_bytes"] != 3240888 || got["process_open_fds"] != 179 || len(got) != 3 {
			t.Errorf("got %v, %v; want goroutines 445, live heap 3240888, open fds 179", got, err)
		}
	})
	t.Run("missing ones named, the rest returned", func(t *testing.T) {
		t.Parallel()
		got, err := promValues(strings.NewReader(text), "go_goroutines", "go_gc_duration_seconds", "process_resident_memory_bytes")
		if err == nil || err.Error() != "/metrics has no go_gc_duration_seconds, process_resident_memory_bytes" || got["go_goroutines"] != 445 {
			t.Errorf("got %v, %v; want goroutines and an error naming the two missing", got, err)
		}
	})
	t.Run("a value that is not a number", func(t *testing.T) {
		t.Parallel()
		if _, err := promValues(strings.NewReader("go_goroutines many\n"), "go_goroutines"); err == nil {
			t.Error("no error")
		}
	})
}

// TestCountEstablished: only established sockets that are the process's
// own count, from a table as /proc/<pid>/net/tcp writes it.
func TestCountEstablished(t *testing.T) {
	t.Parallel()
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:24D8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:A1B2 0100007F:4A9C 01 00000000:00000000 00:00000000 00000000     0        0 1002 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:A1B3 0100007F:4A9C 01 00000000:00000000 00:00000000 00000000     0        0 2002 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:A1B4 0100007F:4A9C 06 00000000:00000000 03:00000F2B 00000000     0        0 1003 1 0000000000000000 20 4 30 10 -1
`
	ours := map[string]bool{"1001": true, "1002": true, "1003": true} // a listener, an established, one in TIME_WAIT
	if n := countEstablished([]byte(table), ours); n != 1 {
		t.Errorf("%d established, want 1", n)
	}
	if n := countEstablished(nil, ours); n != 0 {
		t.Errorf("%d established in no table, want 0", n)
	}
	ours["2002"] = true // established too, to the same port
	if n := countEstablished([]byte(table), ours, 0x4A9C); n != 2 {
		t.Errorf("%d established to port %d, want 2", n, 0x4A9C)
	}
	if n := countEstablished([]byte(table), ours, 9092, 0x24D8); n != 0 {
		t.Errorf("%d established to ports 9092 and %d (a listener's own), want 0", n, 0x24D8)
	}
}

// TestLatenessWindow: each window holds what arrived since the one before.
func TestLatenessWindow(t *testing.T) {
	t.Parallel()
	c := &collector{}
	g := newLateness(GroupDueInRun)
	w := latenessWindow{g: g}
	now := time.Now()
	// near: the histogram keeps three significant digits.
	near := func(got, want time.Duration) bool { return got >= want && got <= want+want/1000 }
	for _, ms := range []time.Duration{1, 2, 3} {
		g.record(ms*time.Millisecond, now, now)
	}
	if got := c.window(&w); got.N != 3 || !near(got.P50, 2*time.Millisecond) || !near(got.Max, 3*time.Millisecond) {
		t.Errorf("first window %+v, want 3 records, p50 2ms, max 3ms", got)
	}
	g.record(40*time.Millisecond, now, now)
	if got := c.window(&w); got.N != 1 || !near(got.P50, 40*time.Millisecond) {
		t.Errorf("second window %+v, want the 40ms record alone", got)
	}
	if got := c.window(&w); got != (Window{}) {
		t.Errorf("empty window %+v, want zero", got)
	}
}

// TestLogUniform: delays stay within their bounds, to the millisecond,
// with as many in each decade.
func TestLogUniform(t *testing.T) {
	t.Parallel()
	delay := logUniform(1, 100*time.Millisecond, 100*time.Second)
	decades := map[int]int{}
	for range 30000 {
		d := delay()
		if d < 100*time.Millisecond || d > 100*time.Second || d%time.Millisecond != 0 {
			t.Fatalf("delay %s, want 100ms to 100s in whole milliseconds", d)
		}
		decades[min(int(math.Floor(math.Log10(d.Seconds()))), 1)]++ // -1: under 1s, 0: under 10s, 1: the rest
	}
	for decade, n := range decades {
		if n < 9500 || n > 10500 {
			t.Errorf("%d of 30000 delays in decade %d, want about 10000: %v", n, decade, decades)
		}
	}
}

// TestSoakConfig: the warm-up follows the duration, and what cannot run is
// refused with the fix.
func TestSoakConfig(t *testing.T) {
	t.Parallel()
	t.Run("warm-up", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct{ duration, maxDelay, warmup, want time.Duration }{
			{time.Hour, 0, 0, 6 * time.Minute},
			{10 * time.Minute, 0, 0, 200 * time.Second}, // the default max-delay
			{10 * time.Minute, time.Minute, 0, 2 * time.Minute},
			{5 * time.Minute, 0, 0, 150 * time.Second},
			{time.Hour, 0, 30 * time.Second, 30 * time.Second},
		} {
			cfg := SoakConfig{Duration: tt.duration, MaxDelay: tt.maxDelay, Warmup: tt.warmup}.WithDefaults()
			if cfg.Warmup != tt.want {
				t.Errorf("duration %s, max-delay %s, warmup %s: %s, want %s", tt.duration, tt.maxDelay, tt.warmup, cfg.Warmup, tt.want)
			}
		}
	})
	tests := []struct {
		name string
		cfg  SoakConfig
		want string
	}{
		{"in process", SoakConfig{Runner: InProcess{}}, "runner: in-process runs in the benchmark's own process"},
		{"running without brokers", SoakConfig{Runner: Running{}}, "runner: a running kdelay serve is soaked on its cluster"},
		{"delays the wrong way round", SoakConfig{MinDelay: time.Minute, MaxDelay: time.Second}, "use 0 < min-delay ≤ max-delay"},
		{"too few samples after the warm-up", SoakConfig{Duration: time.Minute, Warmup: 30 * time.Second, Interval: 10 * time.Second},
			"holds 3 samples 10s apart; a slope needs 5: lengthen duration"},
		{"negative rate", SoakConfig{Rate: -1}, "rate: -1; use at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.WithDefaults().validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if err := (SoakConfig{}).WithDefaults().validate(); err != nil {
		t.Errorf("defaults refused: %v", err)
	}
	var cfgErr ConfigError
	if _, err := Soak(t.Context(), SoakConfig{Rate: -1}); !errors.As(err, &cfgErr) {
		t.Errorf("Soak with a bad config: %v, want a ConfigError", err)
	}
}
