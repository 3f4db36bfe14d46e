package bench

import (
	"strings"
	"testing"

	"golang.org/x/perf/benchfmt"
)

func TestLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		iters int
		pairs []any
		want  string
	}{
		{"Lateness/level=1s/mode=exact", 200, []any{int64(1100000), "p50-ns", int64(0), "early"},
			"BenchmarkLateness/level=1s/mode=exact 200 1100000 p50-ns 0 early\n"},
		{"Throughput/path=kdelay", 100000, []any{123456.5, "records/s"}, "BenchmarkThroughput/path=kdelay 100000 123456.5 records/s\n"},
		{"no records measured", 0, []any{0, "lost"}, "Benchmarkno_records_measured 1 0 lost\n"},
	}
	for _, tt := range tests {
		if got := line(tt.name, tt.iters, tt.pairs...); got != tt.want {
			t.Errorf("line(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestWriteBenchfmt(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := WriteBenchfmt(&out, sampleReport()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"cpu: Test CPU @ 2GHz\n",
		"BenchmarkLateness/level=1s/mode=exact 200 1100000 p50-ns 1100000 p90-ns 3200000 p99-ns 3200000 p99.9-ns 3201000 max-ns 0 early 0 lost 0 dups\n",
		"BenchmarkLateness/group=steady/mode=poll 300 51000000 p50-ns ",
		"BenchmarkForwarder/mode=exact 1 1500000000 cpu-ns 41943040 peak-rss-B\n",
		"BenchmarkThroughput/path=raw-copy 100000 400000 records/s\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("benchmark lines do not contain %q:\n%s", want, out.String())
		}
	}
}

// TestBenchstatReads reads what `kdelay bench` prints, table and lines
// together, with benchstat's own parser: every benchmark line parses, the
// table adds no configuration, and -ns units become seconds.
func TestBenchstatReads(t *testing.T) {
	t.Parallel()
	rep := sampleReport()
	var out strings.Builder
	if err := WriteTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	if err := WriteBenchfmt(&out, rep); err != nil {
		t.Fatal(err)
	}
	r := benchfmt.NewReader(strings.NewReader(out.String()), "bench.txt")
	var results int
	found := false
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			t.Fatalf("benchstat cannot read a line: %v", r.Result())
		}
		results++
		var keys []string
		for _, c := range res.Config {
			keys = append(keys, c.Key)
		}
		if got, want := strings.Join(keys, ","), "goos,goarch,pkg,cpu,broker,forwarder"; got != want {
			t.Errorf("%s: configuration keys %s, want %s: a table line reads as configuration", res.Name, got, want)
		}
		if string(res.Name.Full()) == "Lateness/level=1s/mode=exact" {
			found = true
			if v, ok := res.Value("p99-sec"); !ok || v != 0.0032 {
				t.Errorf("p99 of level=1s reads as %v %v seconds, want 0.0032", v, ok)
			}
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Error("benchstat did not read Lateness/level=1s/mode=exact")
	}
	if want := 6 + 2 + 3 + 3; results != want {
		t.Errorf("benchstat read %d results, want %d", results, want)
	}
}
