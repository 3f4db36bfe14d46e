package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// soakChartSeries are the memory figures drawn, each with its color; the
// fitted line is drawn for those with a goal.
var soakChartSeries = []struct {
	name  string
	color string
	of    func(SoakSample) int64
	goal  bool
}{
	{TrendRSS, "#1f77b4", func(s SoakSample) int64 { return s.Serve.RSS }, true},
	{TrendHeapInuse, "#ff7f0e", func(s SoakSample) int64 { return s.Serve.HeapInuse }, false},
	{TrendHeapLive, "#2ca02c", func(s SoakSample) int64 { return s.Serve.HeapLive }, true},
}

// WriteSoakSVG draws the memory of the kdelay serve under test through the
// run, on linear axes: RSS, heap in use and live heap in MB against the
// time into the run, the warm-up shaded, and the line fitted after it to
// RSS and the live heap (the figures the goal is on), dashed.
func WriteSoakSVG(w io.Writer, r *SoakReport) error {
	top := 1.0 // MB
	for _, s := range r.Samples {
		for _, series := range soakChartSeries {
			top = max(top, float64(series.of(s))/(1<<20))
		}
	}
	top = niceCeil(top * 1.1)
	span := max(r.Duration, time.Second)
	x := func(d time.Duration) float64 { return plotLeft + float64(d)/float64(span)*(plotRight-plotLeft) }
	y := func(mb float64) float64 { return plotBottom - mb/top*(plotBottom-plotTop) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	broker := r.Broker
	if r.Embedded {
		broker = "the embedded broker, in a process of its own"
	}
	fmt.Fprintf(&b, `<text x="%d" y="30" font-size="17">%s</text>`+"\n", plotLeft,
		esc(fmt.Sprintf("kdelay serve memory under %d records/s, on %s", r.Rate, broker)))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#eee"/>`+"\n", plotLeft, plotTop, x(r.Warmup)-plotLeft, plotBottom-plotTop)
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#777">warm-up</text>`+"\n", plotLeft+6, plotTop+16)
	writeSoakAxes(&b, top, span, y)
	for _, series := range soakChartSeries {
		var points []string
		for _, s := range r.Samples {
			if v := series.of(s); v >= 0 {
				points = append(points, fmt.Sprintf("%.1f,%.1f", x(s.At), y(float64(v)/(1<<20))))
			}
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(points, " "), series.color)
		if t, ok := r.Trend(series.name); ok && series.goal {
			at := func(d time.Duration) float64 { return y(t.Intercept + t.PerHour*d.Hours()) }
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4"><title>%s</title></line>`+"\n",
				x(r.Warmup), at(r.Warmup), x(r.Duration), at(r.Duration), series.color, esc(fmt.Sprintf("%s: %+.2f MB/h", t.Name, t.PerHour)))
		}
	}
	writeSoakLegend(&b, r)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func writeSoakAxes(b *strings.Builder, top float64, span time.Duration, y func(float64) float64) {
	for i := 0; i <= 5; i++ {
		v := top * float64(i) / 5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y(v), plotRight, y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%g</text>`+"\n", plotLeft-8, y(v), v)
	}
	for i := 0; i <= 6; i++ {
		d := span * time.Duration(i) / 6
		x := plotLeft + float64(i)/6*(plotRight-plotLeft)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, plotBottom+20, clock(d))
	}
	fmt.Fprintf(b, `<text x="20" y="%d" transform="rotate(-90 20 %d)" text-anchor="middle">MB</text>`+"\n", (plotTop+plotBottom)/2, (plotTop+plotBottom)/2)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">time into the run (h:mm:ss)</text>`+"\n", (plotLeft+plotRight)/2, plotBottom+45)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop)
}

func writeSoakLegend(b *strings.Builder, r *SoakReport) {
	y := plotTop + 10
	for _, series := range soakChartSeries {
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", plotRight+20, y, plotRight+50, y, series.color)
		fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">%s</text>`+"\n", plotRight+58, y, esc(series.name))
		if t, ok := r.Trend(series.name); ok {
			fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle" font-size="11">%+.2f ± %.2f MB/h</text>`+"\n", plotRight+58, y+16, t.PerHour, t.Noise)
		}
		y += 40
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333" stroke-width="2" stroke-dasharray="6 4"/>`+"\n", plotRight+20, y, plotRight+50, y)
	fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">fitted after warm-up</text>`+"\n", plotRight+58, y)
}
