package bench_test

import (
	"context"
	"log"
	"os"
	"time"

	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// Measure exact mode on 100 records delayed by 1s, on an embedded broker,
// with the forwarder running in this process.
func ExampleRun() {
	set, err := levels.Parse([]string{"1s", "5s"})
	if err != nil {
		log.Fatal(err)
	}
	rep, err := bench.Run(context.Background(), bench.Config{
		Modes:    []forwarder.Mode{forwarder.ModeExact},
		Levels:   set,
		Workload: bench.Workload{Levels: []string{"1s"}, PerLevel: 100, Spread: 5 * time.Second},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = bench.WriteTable(os.Stdout, rep)
	_ = bench.WriteBenchfmt(os.Stdout, rep)
}

// Measure a kdelay serve child's memory with 100,000 records pending, its
// idle CPU, and a burst of 100,000 records due at once.
func ExampleScale() {
	rep, err := bench.Scale(context.Background(), bench.ScaleConfig{
		Runner:  bench.Command{Path: "kdelay"},
		Pending: 100_000,
		Burst:   100_000,
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = bench.WriteJSON(os.Stdout, rep)
}
