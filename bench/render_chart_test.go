package bench

import (
	"encoding/xml"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// TestWriteSVG: the chart is well-formed SVG with a marker for p50, p99
// and max of every mode at every level, delay and the floor (its tooltip
// giving the figure), and a legend entry for each.
func TestWriteSVG(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := WriteSVG(&out, sampleReport()); err != nil {
		t.Fatal(err)
	}
	var titles, legend, axis []string
	dec := xml.NewDecoder(strings.NewReader(out.String()))
	var inText, inTitle bool
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, out.String())
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inText, inTitle = tok.Name.Local == "text", tok.Name.Local == "title"
			if inText && slices.ContainsFunc(tok.Attr, func(a xml.Attr) bool { return a.Name.Local == "transform" && strings.HasPrefix(a.Value, "rotate(-35") }) {
				inText = false
				axis = append(axis, "") // the next CharData
			}
		case xml.CharData:
			switch s := string(tok); {
			case inTitle:
				titles = append(titles, s)
			case len(axis) > 0 && axis[len(axis)-1] == "":
				axis[len(axis)-1] = s
			case inText && (strings.HasPrefix(s, "exact ") || strings.HasPrefix(s, "poll ")):
				legend = append(legend, s)
			}
		case xml.EndElement:
			inText, inTitle = false, false
		}
	}
	if want := []string{"level=1s", "delay=3m17s", GroupFloor}; !slices.Equal(axis, want) {
		t.Errorf("x axis %q, want %q: levels, delays, the floor, and no aggregate", axis, want)
	}
	for _, want := range []string{
		"exact level=1s 1.100ms", "exact level=1s 3.200ms", "exact level=1s 3.201ms",
		"exact delay=3m17s 4.100ms", "exact floor 2.500ms",
		"poll level=1s 50.000ms", "poll level=1s 99.001ms",
	} {
		if !slices.Contains(titles, want) {
			t.Errorf("no marker %q among %q", want, titles)
		}
	}
	// exact: 3 categories × 3 statistics; poll measured level=1s only.
	if len(titles) != 9+3 {
		t.Errorf("%d markers, want 12: %q", len(titles), titles)
	}
	if want := []string{"exact p50", "exact p99", "exact max", "poll p50", "poll p99", "poll max"}; !slices.Equal(legend, want) {
		t.Errorf("legend %q, want %q", legend, want)
	}
}

func TestChartCategories(t *testing.T) {
	t.Parallel()
	delivered := func(name string) Group { return Group{Name: name, Sent: 1, Delivered: 1} }
	rep := &Report{Modes: []ModeResult{
		{Mode: forwarder.ModeExact, Groups: []Group{
			delivered("level=1s"), delivered("delay=1.4s"), delivered(GroupSteady), delivered(GroupFloor),
			{Name: "level=5s", Sent: 3}, // none arrived: nothing to draw
		}},
		{Mode: forwarder.ModePoll, Groups: []Group{delivered("level=1s"), delivered("level=2s"), delivered("hops=1")}},
	}}
	want := []string{"level=1s", "level=2s", "delay=1.4s", GroupFloor}
	if got := chartCategories(rep); !slices.Equal(got, want) {
		t.Errorf("categories %q, want %q", got, want)
	}
}

// TestChartRange: the log axis spans 0.1ms to 100ms at least, and widens
// to whole powers of ten to hold every figure drawn.
func TestChartRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		g      Group
		lo, hi float64
	}{
		{"within the default", Group{P50: time.Millisecond, P99: 5 * time.Millisecond, Max: 90 * time.Millisecond}, -1, 2},
		{"a max of 2s", Group{P50: time.Millisecond, Max: 2 * time.Second}, -1, 4},
		{"a p50 of 20µs", Group{P50: 20 * µs, Max: time.Millisecond}, -2, 2},
		{"zero is not drawn on the scale", Group{}, -1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.g.Name, tt.g.Delivered = "level=1s", 1
			rep := &Report{Modes: []ModeResult{{Mode: forwarder.ModeExact, Groups: []Group{tt.g}}}}
			lo, hi := chartRange(rep, chartCategories(rep))
			if lo != tt.lo || hi != tt.hi {
				t.Errorf("range 10^%v to 10^%v ms, want 10^%v to 10^%v", lo, hi, tt.lo, tt.hi)
			}
		})
	}
}

// TestYOf: the axis's ends are the plot's, zero sits on the floor, and a
// power of ten sits on its grid line.
func TestYOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want float64
	}{
		{0, plotBottom},
		{time.Microsecond, plotBottom}, // below the axis: on its floor
		{100 * µs, plotBottom},
		{100 * time.Millisecond, plotTop},
		{time.Millisecond, plotBottom - (plotBottom-plotTop)/3.0},
	}
	for _, tt := range tests {
		if got := yOf(tt.d, -1, 2); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("yOf(%s) = %v, want %v", tt.d, got, tt.want)
		}
	}
}
