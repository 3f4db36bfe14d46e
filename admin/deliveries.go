package admin

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Deliveries is what one level's forwarder delivered, read from
// kdelay_delivery_lateness_seconds: how many records, and how late, in the
// buckets of LatenessBuckets. Counts are since the Metrics was made; the
// difference of two readings (Since) is what was delivered between them.
type Deliveries struct {
	Level   string
	Records uint64
	// Buckets are the records at most LatenessBuckets[i] late, cumulative
	// as Prometheus counts them; Records counts those later than the last.
	Buckets []uint64
}

// Deliveries reads, for every level counted, what it delivered and how
// late, sorted by level name.
func (m *Metrics) Deliveries() []Deliveries {
	ch := make(chan prometheus.Metric)
	go func() {
		m.lateness.Collect(ch)
		close(ch)
	}()
	var out []Deliveries
	for metric := range ch {
		var pb dto.Metric
		if err := metric.Write(&pb); err != nil || pb.Histogram == nil {
			continue // a histogram always writes itself
		}
		d := Deliveries{Records: pb.Histogram.GetSampleCount()}
		for _, l := range pb.Label {
			if l.GetName() == "level" {
				d.Level = l.GetValue()
			}
		}
		for _, b := range pb.Histogram.Bucket {
			if !math.IsInf(b.GetUpperBound(), 1) {
				d.Buckets = append(d.Buckets, b.GetCumulativeCount())
			}
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Deliveries) int { return strings.Compare(a.Level, b.Level) })
	return out
}

// Since is what d counts that earlier, a reading of the same level made
// before, does not: what was delivered between the two readings.
func (d Deliveries) Since(earlier Deliveries) Deliveries {
	out := Deliveries{Level: d.Level, Records: d.Records - earlier.Records, Buckets: slices.Clone(d.Buckets)}
	for i := range out.Buckets {
		if i < len(earlier.Buckets) {
			out.Buckets[i] -= earlier.Buckets[i]
		}
	}
	return out
}

// Quantile estimates how late the q-quantile (0.5, 0.99) of the records was,
// as Prometheus's histogram_quantile does: it finds the bucket that holds
// it and interpolates linearly within it. over is true when the quantile
// is later than the last bucket's bound, which is then returned: it is
// known to be later, not by how much. No record gives 0.
func (d Deliveries) Quantile(q float64) (late time.Duration, over bool) {
	if d.Records == 0 {
		return 0, false
	}
	rank := q * float64(d.Records)
	lower, below := 0.0, uint64(0)
	for i, n := range d.Buckets {
		upper := LatenessBuckets[i]
		if float64(n) >= rank && n > below {
			at := lower + (upper-lower)*(rank-float64(below))/float64(n-below)
			return time.Duration(at * float64(time.Second)), false
		}
		lower, below = upper, n
	}
	return time.Duration(lower * float64(time.Second)), true
}
