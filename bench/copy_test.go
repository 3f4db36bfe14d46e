package bench

import "testing"

func TestMedian(t *testing.T) {
	t.Parallel()
	tests := []struct {
		runs []float64
		want float64
	}{
		{nil, 0},
		{[]float64{5}, 5},
		{[]float64{9, 1, 5}, 5},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.runs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.runs, got, tt.want)
		}
	}
}
