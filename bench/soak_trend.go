package bench

import (
	"math"
	"slices"
	"time"
)

// Trend is how one sampled figure moved after the warm-up: where it was
// and how fast it grew, in Unit and Unit per hour.
type Trend struct {
	Name    string  `json:"name"`
	Unit    string  `json:"unit"` // "MB" (2^20 bytes), "%" of a core, "ms", or "" for a count
	Samples int     `json:"samples"`
	First   float64 `json:"first"` // at the first sample after the warm-up
	Last    float64 `json:"last"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	PerHour float64 `json:"per_hour"` // the slope, Theil–Sen
	// Intercept is where the fitted line starts, at the start of the
	// load: the line is Intercept + PerHour × hours since.
	Intercept float64 `json:"intercept"`
	// Noise is three standard errors of PerHour, from how far the samples
	// scatter about the fitted line: a slope within ±Noise of another is
	// not told apart from it by this run. It shrinks as a run lengthens.
	Noise float64 `json:"noise_per_hour"`
}

// series is a figure of the samples that gets a trend, in its unit; ok is
// false for a sample that has no value for it. settle is how far it moves
// after the warm-up without growing, in its unit: a fit over h hours does
// not tell a slope below settle/h from none, and its noise is at least
// that.
type series struct {
	name, unit string
	of         func(s, prev SoakSample) (v float64, ok bool)
	settle     float64
}

// rssSettle is how far RSS may creep up after the warm-up of a steady
// load without growing, in MB. With the live heap level it rose by up to
// about a MB, as much over 3 minutes as over 18 (docs/BENCHMARKS.md,
// "Soak"): by a step now and then, fewer the longer the run, not at a
// rate; most likely pages taken at the heap's highest peaks so far, kept
// until the runtime's scavenger returns them. Twice the most seen is
// allowed: a 5-minute run's RSS goal is 40 MB/h wider, an hour's about
// 2 MB/h, and a leak of 3 MB/h still fails the hour.
const rssSettle = 2.0

// soakSeries are the figures that get a trend: the kdelay serve under
// test's, the lateness, and the embedded broker's memory and log.
func soakSeries() []series {
	serve := func(s SoakSample) *ProcSample { return &s.Serve }
	broker := func(s SoakSample) *ProcSample { return s.Broker }
	rss := func(p ProcSample) int64 { return p.RSS }
	live := func(p ProcSample) int64 { return p.HeapLive }
	rssOfServe := procSeries(TrendRSS, "MB", serve, rss)
	rssOfServe.settle = rssSettle
	return []series{
		rssOfServe,
		procSeries(TrendHeapInuse, "MB", serve, func(p ProcSample) int64 { return p.HeapInuse }),
		procSeries(TrendHeapLive, "MB", serve, live),
		procSeries("goroutines", "", serve, func(p ProcSample) int64 { return p.Goroutines }),
		procSeries("open files", "", serve, func(p ProcSample) int64 { return p.OpenFDs }),
		procSeries("TCP connections", "", serve, func(p ProcSample) int64 { return p.TCPConns }),
		{name: "CPU", unit: "%", of: func(s, prev SoakSample) (float64, bool) { return cpuShare(s.Serve, prev.Serve, s.At-prev.At) }},
		{name: "p99 lateness", unit: "ms", of: func(s, _ SoakSample) (float64, bool) {
			return float64(s.Late.P99) / float64(time.Millisecond), s.Late.N > 0
		}},
		procSeries("broker "+TrendRSS, "MB", broker, rss),
		procSeries("broker "+TrendHeapLive, "MB", broker, live),
		{name: TrendBrokerLog, unit: "MB", of: func(s, _ SoakSample) (float64, bool) { return mb(s.BrokerLog) }},
	}
}

// procSeries is the series of one figure of a process; proc is nil for a
// sample without that process.
func procSeries(name, unit string, proc func(SoakSample) *ProcSample, figure func(ProcSample) int64) series {
	return series{name: name, unit: unit, of: func(s, _ SoakSample) (float64, bool) {
		p := proc(s)
		if p == nil {
			return 0, false
		}
		v := figure(*p)
		if unit == "MB" {
			return mb(v)
		}
		return float64(v), v >= 0
	}}
}

// Names of the trends goals are checked on.
const (
	TrendRSS       = "RSS"
	TrendHeapInuse = "heap in use"
	TrendHeapLive  = "live heap"
	TrendBrokerLog = "embedded broker's log"
)

func mb(b int64) (float64, bool) { return float64(b) / (1 << 20), b > 0 }

// trends fits every series over the samples after warmup. A series with
// fewer than minSlopeSamples values there is left out: the broker's log on
// a cluster, the connections of a process without a pid.
func trends(samples []SoakSample, warmup time.Duration) []Trend {
	var out []Trend
	for _, series := range soakSeries() {
		var t, y []float64
		for i, s := range samples {
			if s.At < warmup || i == 0 {
				continue
			}
			if v, ok := series.of(s, samples[i-1]); ok {
				t, y = append(t, s.At.Hours()), append(y, v)
			}
		}
		if len(y) < minSlopeSamples {
			continue
		}
		f := theilSen(t, y)
		if span := t[len(t)-1] - t[0]; series.settle > 0 && span > 0 {
			f.noise = max(f.noise, series.settle/span)
		}
		out = append(out, Trend{
			Name: series.name, Unit: series.unit, Samples: len(y), First: y[0], Last: y[len(y)-1],
			Min: slices.Min(y), Max: slices.Max(y), PerHour: f.slope, Intercept: f.intercept, Noise: f.noise,
		})
	}
	return out
}

// maxSlopePoints bounds the points theilSen pairs: their pairs number n²/2,
// 1.1 million for 1,500 points (ten seconds apart, over four hours). A
// longer run is thinned evenly to as many.
const maxSlopePoints = 1500

// fit is a line y = intercept + slope·t, and the noise of its slope: three
// standard errors.
type fit struct{ intercept, slope, noise float64 }

// theilSen fits a line to the points, in time order.
//
// Why Theil–Sen, the median of the slopes between every two points: memory
// sampled every few seconds is a sawtooth (the heap grows to its goal, a
// collection drops it to what is live) sampled at a phase that drifts, plus
// the odd spike of a burst of fetches. Least squares gives those points the
// weight of their squared distance, so one spike near an end of the run
// tilts the line; the median of pairwise slopes ignores up to 29% of
// points that are wild, and on well-behaved data is as precise as least
// squares.
func theilSen(t, y []float64) fit {
	t, y = thin(t, maxSlopePoints), thin(y, maxSlopePoints)
	var slopes []float64
	for i := range t {
		for j := i + 1; j < len(t); j++ {
			if t[j] > t[i] {
				slopes = append(slopes, (y[j]-y[i])/(t[j]-t[i]))
			}
		}
	}
	if len(slopes) == 0 {
		return fit{}
	}
	f := fit{slope: median(slopes)}
	offsets := make([]float64, len(t))
	for i := range t {
		offsets[i] = y[i] - f.slope*t[i]
	}
	f.intercept = median(offsets)
	f.noise = f.noiseOf(t, y)
	return f
}

// noiseOf is three standard errors of f's slope over the points: ± that
// covers a slope from noise alone 99.7 times in 100.
//
// The scatter is 1.4826 × the median absolute residual, which is the
// standard deviation for normal noise and is not inflated by spikes; over
// the spread of the sample times, as for least squares, it gives the
// standard error of independent samples. Samples of memory are not
// independent: RSS and the live heap move slowly, so a sample is close to
// the one before, and a run holds fewer independent samples than it took.
// The lag-1 autocorrelation ρ of the residuals says how many fewer (an
// AR(1) series of n samples counts as n(1−ρ)/(1+ρ)), and the error grows
// by the square root of the ratio.
func (f fit) noiseOf(t, y []float64) float64 {
	residuals := make([]float64, len(t))
	abs := make([]float64, len(t))
	for i := range t {
		residuals[i] = y[i] - f.intercept - f.slope*t[i]
		abs[i] = math.Abs(residuals[i])
	}
	sigma := 1.4826 * median(abs)
	var mean, spread float64
	for _, v := range t {
		mean += v / float64(len(t))
	}
	for _, v := range t {
		spread += (v - mean) * (v - mean)
	}
	rho := min(max(lag1(residuals), 0), 0.9)
	return 3 * sigma / math.Sqrt(spread) * math.Sqrt((1+rho)/(1-rho))
}

// lag1 is the lag-1 autocorrelation of xs, which have mean about 0; 0 for
// xs all 0.
func lag1(xs []float64) float64 {
	var num, den float64
	for i, x := range xs {
		den += x * x
		if i > 0 {
			num += x * xs[i-1]
		}
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// thin returns at most n of xs, evenly spaced, the first and last kept.
func thin(xs []float64, n int) []float64 {
	if len(xs) <= n {
		return xs
	}
	out := make([]float64, n)
	for i := range n {
		out[i] = xs[i*(len(xs)-1)/(n-1)]
	}
	return out
}
