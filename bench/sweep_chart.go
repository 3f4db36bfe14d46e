package bench

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// The sweep's chart is two panels over one axis of rates: lateness above,
// peak RSS below. Rates span decades, and so does lateness between the
// floor and a serve that falls behind: both are on logarithmic axes. Peak
// RSS, which the goal bounds, is on a linear one.
const (
	sweepLateTop, sweepLateBottom = plotTop, 290
	sweepRSSTop, sweepRSSBottom   = 330, plotBottom
)

// sweepLateSeries are the lateness figures drawn, each with its color and
// dash: kdelay's p99 and max, and the floor's p99 they are judged beside.
var sweepLateSeries = []struct {
	name, color, dash string
	of                func(SweepRow) time.Duration
}{
	{"p99", "#1f77b4", "", func(r SweepRow) time.Duration { return r.Judged.P99 }},
	{"max", "#d62728", "", func(r SweepRow) time.Duration { return r.Judged.Max }},
	{"floor p99", "#7f7f7f", "6 4", func(r SweepRow) time.Duration { return r.Floor.P99 }},
}

const (
	sweepRSSColor = "#2ca02c"
	sweepRatePad  = 20 // SVG user units
)

// WriteSweepSVG draws each rate's lateness (p99, max, and the floor's p99)
// on a logarithmic axis of milliseconds, and the peak RSS of kdelay serve
// in MB with the goal's line, against the rate on a logarithmic axis.
func WriteSweepSVG(w io.Writer, r *SweepReport) error {
	var rows []SweepRow
	for _, row := range r.Rows {
		if row.Judged.Delivered > 0 {
			rows = append(rows, row)
		}
	}
	x := sweepRateAxis(rows)
	lo, hi := sweepLateRange(rows)
	late := func(d time.Duration) float64 { return logAxis(d, lo, hi, sweepLateTop, sweepLateBottom) }
	top := float64(sweepPeakRSS) / (1 << 20)
	for _, row := range rows {
		top = max(top, float64(row.Serve.PeakRSS)/(1<<20))
	}
	top = niceCeil(top * 1.1)
	rss := func(mb float64) float64 { return sweepRSSBottom - mb/top*(sweepRSSBottom-sweepRSSTop) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	broker := r.Broker
	if r.Embedded {
		broker = "the embedded broker"
	}
	fmt.Fprintf(&b, `<text x="%d" y="30" font-size="17">%s</text>`+"\n", plotLeft,
		esc(fmt.Sprintf("kdelay serve at sustained rates, each for %s, on %s", r.For, broker)))
	writeSweepAxes(&b, rows, x, lo, hi, late, top, rss)
	writeSweepLateness(&b, rows, x, late)
	writeSweepRSS(&b, rows, x, rss)
	writeSweepLegend(&b)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeSweepLateness draws each series of sweepLateSeries: a marker per
// rate, joined.
func writeSweepLateness(b *strings.Builder, rows []SweepRow, x func(int) float64, late func(time.Duration) float64) {
	for _, s := range sweepLateSeries {
		var points []string
		for _, row := range rows {
			px, py := x(row.Rate), late(s.of(row))
			points = append(points, fmt.Sprintf("%.1f,%.1f", px, py))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%d/s %s %sms</title></circle>`+"\n",
				px, py, s.color, row.Rate, esc(s.name), ms(s.of(row)))
		}
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n",
			strings.Join(points, " "), s.color, s.dash)
	}
}

// writeSweepRSS draws the peak RSS of kdelay serve at each rate where it
// was read.
func writeSweepRSS(b *strings.Builder, rows []SweepRow, x func(int) float64, rss func(float64) float64) {
	var points []string
	for _, row := range rows {
		if row.Serve.PeakRSS < 0 {
			continue
		}
		mb := float64(row.Serve.PeakRSS) / (1 << 20)
		points = append(points, fmt.Sprintf("%.1f,%.1f", x(row.Rate), rss(mb)))
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%d/s peak RSS %.1f MB</title></circle>`+"\n",
			x(row.Rate), rss(mb), sweepRSSColor, row.Rate, mb)
	}
	fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(points, " "), sweepRSSColor)
}

// sweepRateAxis places a rate on a logarithmic axis across the plot, from
// the power of ten below the lowest rate to the one above the highest,
// sweepRatePad in from either side so that no marker sits on the frame.
func sweepRateAxis(rows []SweepRow) func(rate int) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		e := math.Log10(float64(r.Rate))
		lo, hi = min(lo, math.Floor(e)), max(hi, math.Ceil(e))
	}
	if len(rows) == 0 {
		lo, hi = 3, 5
	}
	if hi == lo {
		hi = lo + 1
	}
	return func(rate int) float64 {
		return plotLeft + sweepRatePad + (math.Log10(float64(rate))-lo)/(hi-lo)*(plotRight-plotLeft-2*sweepRatePad)
	}
}

// sweepLateRange is the lateness axis in powers of ten of milliseconds,
// from 0.1 ms to 100 ms or as much wider as the rows need.
func sweepLateRange(rows []SweepRow) (lo, hi float64) {
	lo, hi = -1, 2
	for _, r := range rows {
		for _, s := range sweepLateSeries {
			if v := s.of(r); v > 0 {
				e := math.Log10(float64(v) / float64(time.Millisecond))
				lo, hi = min(lo, math.Floor(e)), max(hi, math.Ceil(e))
			}
		}
	}
	return lo, hi
}

// logAxis places a lateness on a logarithmic axis from top to bottom; zero
// sits on the bottom.
func logAxis(d time.Duration, lo, hi float64, top, bottom int) float64 {
	e := lo
	if d > 0 {
		e = max(lo, math.Log10(float64(d)/float64(time.Millisecond)))
	}
	return float64(bottom) - (e-lo)/(hi-lo)*float64(bottom-top)
}

func writeSweepAxes(b *strings.Builder, rows []SweepRow, x func(int) float64, lo, hi float64,
	late func(time.Duration) float64, top float64, rss func(float64) float64) {
	for e := lo; e <= hi; e++ {
		y := late(time.Duration(math.Pow(10, e) * float64(time.Millisecond)))
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y, plotRight, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n",
			plotLeft-8, y, strconv.FormatFloat(math.Pow(10, e), 'f', -1, 64))
	}
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, rss(v), plotRight, rss(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%g</text>`+"\n", plotLeft-8, rss(v), v)
	}
	goal := float64(sweepPeakRSS) / (1 << 20)
	fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s" stroke-dasharray="6 4"/>`+"\n", plotLeft, rss(goal), plotRight, rss(goal), sweepRSSColor)
	fmt.Fprintf(b, `<text x="%d" y="%.1f" fill="%s" text-anchor="end">goal ≤ %g MB</text>`+"\n", plotRight-6, rss(goal)-5, sweepRSSColor, goal)
	for _, r := range rows {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(r.Rate), sweepLateTop, x(r.Rate), sweepRSSBottom)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(r.Rate), sweepRSSBottom+20, rateLabel(r.Rate))
	}
	for _, panel := range []struct {
		top, bottom int
		label       string
	}{{sweepLateTop, sweepLateBottom, "lateness (ms)"}, {sweepRSSTop, sweepRSSBottom, "peak RSS (MB)"}} {
		mid := (panel.top + panel.bottom) / 2
		fmt.Fprintf(b, `<text x="20" y="%d" transform="rotate(-90 20 %d)" text-anchor="middle">%s</text>`+"\n", mid, mid, panel.label)
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", plotLeft, panel.top, plotRight-plotLeft, panel.bottom-panel.top)
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">records per second asked (log scale)</text>`+"\n", (plotLeft+plotRight)/2, sweepRSSBottom+45)
}

// rateLabel writes a rate for an axis: 5000 as 5k.
func rateLabel(rate int) string {
	if rate >= 1000 && rate%1000 == 0 {
		return strconv.Itoa(rate/1000) + "k"
	}
	return strconv.Itoa(rate)
}

func writeSweepLegend(b *strings.Builder) {
	y := plotTop + 10
	for _, s := range sweepLateSeries {
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n",
			plotRight+20, y, plotRight+50, y, s.color, s.dash)
		fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", plotRight+58, y, esc(s.name))
		y += 22
	}
	y = sweepRSSTop + 10
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", plotRight+20, y, plotRight+50, y, sweepRSSColor)
	fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">peak RSS of serve</text>`+"\n", plotRight+58, y)
}
