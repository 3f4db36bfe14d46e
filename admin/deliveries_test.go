package admin

import (
	"testing"
	"time"
)

func TestDeliveries(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	ingress, level := m.Level("ingress"), m.Level("1m")
	for range 98 {
		level.Delivered(3 * time.Millisecond) // in the bucket (2.5ms, 5ms]
	}
	level.Delivered(20 * time.Millisecond) // (10ms, 25ms]
	level.Delivered(time.Hour)             // past the last bucket, 300s
	before := m.Deliveries()
	ingress.Delivered(0)
	ingress.Delivered(-time.Second) // early counts as 0 late

	after := m.Deliveries()
	if len(after) != 2 || after[0].Level != "1m" || after[1].Level != "ingress" {
		t.Fatalf("Deliveries: %+v, want 1m then ingress", after)
	}
	t.Run("each level counts its records", func(t *testing.T) {
		if after[0].Records != 100 || after[1].Records != 2 {
			t.Errorf("records: 1m %d, ingress %d; want 100 and 2", after[0].Records, after[1].Records)
		}
	})
	t.Run("a quantile is interpolated in the bucket that holds it", func(t *testing.T) {
		tests := []struct {
			q    float64
			want time.Duration
			over bool
		}{
			// 50 of the 98 in (2.5ms, 5ms]: 2.5ms + 2.5ms × 50/98.
			{0.5, 2500*time.Microsecond + 2500*time.Microsecond*50/98, false},
			// The 99th of 100 is the one in (10ms, 25ms], at its bound.
			{0.99, 25 * time.Millisecond, false},
			// The 100th is past 300s: that much is known, not more.
			{1, 300 * time.Second, true},
		}
		for _, tt := range tests {
			got, over := after[0].Quantile(tt.q)
			if d := got - tt.want; d < -time.Microsecond || d > time.Microsecond || over != tt.over {
				t.Errorf("quantile %v of 1m: %v (over the last bucket: %v), want %v (%v)", tt.q, got, over, tt.want, tt.over)
			}
		}
	})
	t.Run("since an earlier reading, what was delivered between", func(t *testing.T) {
		d := after[1].Since(before[1])
		if d.Records != 2 || after[0].Since(before[0]).Records != 0 {
			t.Errorf("since the first reading: ingress %d, 1m %d; want 2 and 0", d.Records, after[0].Since(before[0]).Records)
		}
		if late, over := d.Quantile(0.99); late > time.Millisecond || over {
			t.Errorf("p99 of the ingress's two on-time deliveries: %v, want at most the first bucket's 1ms", late)
		}
		if late, _ := after[0].Since(before[0]).Quantile(0.5); late != 0 {
			t.Errorf("p50 of no delivery: %v, want 0", late)
		}
	})
}
