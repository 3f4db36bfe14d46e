package bench

import "testing"

func TestStatusBytes(t *testing.T) {
	t.Parallel()
	status := []byte("Name:\tkdelay\nVmHWM:\t  204800 kB\nVmRSS:\t   102400 kB\nThreads:\t9\n")
	tests := []struct {
		name string
		want int64
	}{
		{"VmRSS:", 100 << 20},
		{"VmHWM:", 200 << 20},
		{"VmSwap:", 0}, // absent
		{"Name:", 0},   // not a number
	}
	for _, tt := range tests {
		if got := statusBytes(status, tt.name); got != tt.want {
			t.Errorf("statusBytes(%q) = %d, want %d", tt.name, got, tt.want)
		}
	}
}
