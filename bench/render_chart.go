package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// The chart is a few lines and markers on a logarithmic axis: written as
// SVG text here, it needs no charting library, and so no font rendering or
// image packages in the kdelay binary.

// chart geometry, in SVG user units.
const (
	chartWidth, chartHeight = 960, 540
	plotLeft, plotRight     = 80, 780 // the legend sits right of the plot
	plotTop, plotBottom     = 60, 460
)

var (
	modeColors = map[string]string{"exact": "#1f77b4", "poll": "#d62728"}
	// percentiles drawn, each with its own dash and marker size.
	chartStats = []struct {
		name   string
		of     func(Group) time.Duration
		dash   string
		radius int
	}{
		{"p50", func(g Group) time.Duration { return g.P50 }, "", 4},
		{"p99", func(g Group) time.Duration { return g.P99 }, "6 4", 4},
		{"max", func(g Group) time.Duration { return g.Max }, "2 3", 3},
	}
)

// WriteSVG draws r's lateness p50, p99 and max of every mode per level, per
// multi-hop delay and for the machine's floor, on a logarithmic axis, as an
// SVG chart.
func WriteSVG(w io.Writer, r *Report) error {
	cats := chartCategories(r)
	lo, hi := chartRange(r, cats)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n",
		chartWidth, chartHeight, chartWidth, chartHeight)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="30" font-size="17">%s</text>`+"\n", plotLeft, esc("kdelay lateness per level, exact vs RocketMQ-style polling (log scale)"))
	writeAxes(&b, cats, lo, hi)
	for _, m := range r.Modes {
		for _, st := range chartStats {
			writeSeries(&b, m, cats, lo, hi, st.of, st.dash, st.radius)
		}
	}
	writeLegend(&b, r.Modes)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// chartCategories are the groups on the x axis: levels, then multi-hop
// delays, then the floor, as measured in any mode.
func chartCategories(r *Report) []string {
	var cats []string
	seen := map[string]bool{}
	for _, prefix := range []string{"level=", "delay=", GroupFloor} {
		for _, m := range r.Modes {
			for _, g := range m.Groups {
				if strings.HasPrefix(g.Name, prefix) && !seen[g.Name] && g.Delivered > 0 {
					seen[g.Name] = true
					cats = append(cats, g.Name)
				}
			}
		}
	}
	return cats
}

// chartRange is the y axis in powers of ten of milliseconds, wide enough
// for every value drawn.
func chartRange(r *Report, cats []string) (lo, hi float64) {
	lo, hi = -1, 2 // 0.1ms to 100ms
	for _, m := range r.Modes {
		for _, name := range cats {
			g, _ := m.Group(name)
			for _, st := range chartStats {
				if v := st.of(g); v > 0 {
					e := math.Log10(float64(v) / float64(time.Millisecond))
					lo, hi = min(lo, math.Floor(e)), max(hi, math.Ceil(e))
				}
			}
		}
	}
	return lo, hi
}

func xOf(i, n int) float64 {
	step := float64(plotRight-plotLeft) / float64(max(n, 1))
	return plotLeft + step*(float64(i)+0.5)
}

// yOf places a lateness on the log axis; zero sits on the axis floor.
func yOf(d time.Duration, lo, hi float64) float64 {
	e := lo
	if d > 0 {
		e = max(lo, math.Log10(float64(d)/float64(time.Millisecond)))
	}
	return plotBottom - (e-lo)/(hi-lo)*(plotBottom-plotTop)
}

func writeAxes(b *strings.Builder, cats []string, lo, hi float64) {
	for e := lo; e <= hi; e++ {
		y := yOf(time.Duration(math.Pow(10, e)*float64(time.Millisecond)), lo, hi)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotLeft, y, plotRight, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n",
			plotLeft-8, y, strconv.FormatFloat(math.Pow(10, e), 'f', -1, 64))
	}
	fmt.Fprintf(b, `<text x="20" y="%d" transform="rotate(-90 20 %d)" text-anchor="middle">lateness (ms)</text>`+"\n",
		(plotTop+plotBottom)/2, (plotTop+plotBottom)/2)
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n",
		plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop)
	for i, name := range cats {
		x := xOf(i, len(cats))
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-35 %.1f %d)">%s</text>`+"\n",
			x, plotBottom+18, x, plotBottom+18, esc(name))
	}
}

// writeSeries draws one statistic of one mode as a marker at each
// category, joined by a line within levels and within delays: the floor
// stands apart.
func writeSeries(b *strings.Builder, m ModeResult, cats []string, lo, hi float64, of func(Group) time.Duration, dash string, radius int) {
	color := modeColors[string(m.Mode)]
	lines := map[string][]string{} // points by the part of the name before "="
	var kinds []string
	for i, name := range cats {
		g, ok := m.Group(name)
		if !ok || g.Delivered == 0 {
			continue
		}
		x, y := xOf(i, len(cats)), yOf(of(g), lo, hi)
		kind, _, _ := strings.Cut(name, "=")
		if _, ok := lines[kind]; !ok {
			kinds = append(kinds, kind)
		}
		lines[kind] = append(lines[kind], fmt.Sprintf("%.1f,%.1f", x, y))
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="%d" fill="%s"><title>%s %s %sms</title></circle>`+"\n",
			x, y, radius, color, esc(string(m.Mode)), esc(name), ms(of(g)))
	}
	for _, kind := range kinds {
		fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n",
			strings.Join(lines[kind], " "), color, dash)
	}
}

func writeLegend(b *strings.Builder, modes []ModeResult) {
	y := plotTop + 10
	for _, m := range modes {
		for _, st := range chartStats {
			color := modeColors[string(m.Mode)]
			fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5" stroke-dasharray="%s"/>`+"\n",
				plotRight+20, y, plotRight+50, y, color, st.dash)
			fmt.Fprintf(b, `<circle cx="%d" cy="%d" r="%d" fill="%s"/>`+"\n", plotRight+35, y, st.radius, color)
			fmt.Fprintf(b, `<text x="%d" y="%d" dominant-baseline="middle">%s %s</text>`+"\n", plotRight+58, y, esc(string(m.Mode)), st.name)
			y += 22
		}
		y += 10
	}
}

func esc(s string) string { return html.EscapeString(s) }
