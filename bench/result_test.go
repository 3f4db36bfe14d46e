package bench

import (
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

const µs = time.Microsecond

// sampleReport is a report as Run returns it, with round figures.
func sampleReport() *Report {
	group := func(name string, n int64, p50, p99 time.Duration) Group {
		return Group{Name: name, Sent: n, Delivered: n, P50: p50, P90: p50, P99: p99, P999: p99, Max: p99 + µs}
	}
	return &Report{
		Machine: Machine{CPUs: 2, GOMAXPROCS: 2, Model: "Test CPU @ 2GHz", Go: "go1.26", OS: "linux", Arch: "amd64", Steal: 0.001},
		Broker:  "embedded kfake (in the benchmark process)",
		Runner:  "child process: kdelay serve",
		Elapsed: 9 * time.Minute,
		Modes: []ModeResult{
			{Mode: forwarder.ModeExact, Groups: []Group{
				group("level=1s", 200, 1100*µs, 3200*µs), group("delay=3m17s", 100, 1300*µs, 4100*µs),
				group(GroupSteady, 300, 1150*µs, 3900*µs), group(GroupFloor, 200, 1000*µs, 2500*µs),
			}, Usage: Usage{CPU: 1500 * time.Millisecond, PeakRSS: 40 << 20, Measured: true}, Elapsed: 4 * time.Minute},
			{Mode: forwarder.ModePoll, Groups: []Group{
				group("level=1s", 200, 50*time.Millisecond, 99*time.Millisecond), group(GroupSteady, 300, 51*time.Millisecond, 99900*µs),
			}, Usage: Usage{CPU: time.Second, PeakRSS: 38 << 20, Measured: true}, Elapsed: 4 * time.Minute},
		},
		Copy: &CopyResult{Records: 100000, Copy: 400000, Kdelay: 100000, Ratio: 0.25,
			CopyRuns: []float64{400000, 380000, 420000}, KdelayRuns: []float64{100000, 90000, 110000}},
		Goals: []Goal{
			within("p99 lateness", 3900*µs, 10*time.Millisecond),
			atLeast("throughput ÷ raw copy", 0.25, 0.7),
		},
	}
}

// sampleScale is a report as Scale returns it, with round figures.
func sampleScale() *Report {
	return &Report{
		Machine: Machine{CPUs: 2, GOMAXPROCS: 2, Model: "Test CPU @ 2GHz", Go: "go1.26", OS: "linux", Arch: "amd64", Steal: -1},
		Broker:  "kafka:9092",
		Runner:  "child process: kdelay serve",
		Elapsed: 5 * time.Minute,
		Scale: &ScaleResult{
			Pending: 1_000_000, RSSEmpty: 20 << 20, RSSPending: 50 << 20, PeakPending: 60 << 20,
			IdleCPU: 0.005, IdleFor: 30 * time.Second,
			Burst: 1_000_000, BurstWritten: 4200 * time.Millisecond, BurstLead: 30 * time.Second, BurstDrain: 2500 * time.Millisecond,
			BurstLateness: Group{Name: GroupBurst, Sent: 1_000_000, Delivered: 1_000_000, P50: 2 * time.Millisecond, P99: 9 * time.Millisecond},
			Usage:         Usage{CPU: 40 * time.Second, RSS: 55 << 20, PeakRSS: 70 << 20, Measured: true},
		},
	}
}
