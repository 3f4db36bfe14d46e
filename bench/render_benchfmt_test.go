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

// TestWriteBenchfmtParts: each part of a report has its lines, and what
// the run could not measure has none rather than zeros benchstat would
// compare.
func TestWriteBenchfmtParts(t *testing.T) {
	t.Parallel()
	unmeasured := sampleReport()
	unmeasured.Modes[0].Usage = Usage{}
	unmeasured.Machine.Model = ""
	unmeasured.Copy = nil
	tests := []struct {
		name    string
		rep     *Report
		want    []string
		notWant []string
	}{
		{
			name: "scale",
			rep:  sampleScale(),
			want: []string{
				"broker: kafka:9092\n",
				"BenchmarkScale/pending=1000000 1 20971520 rss-empty-B 52428800 rss-pending-B 0.005 idle-cpu-cores\n",
				"BenchmarkScale/burst=1000000 1000000 2500000000 drain-ns 2000000 p50-ns 9000000 p99-ns 0 lost\n",
			},
			notWant: []string{"BenchmarkLateness", "BenchmarkThroughput", "BenchmarkForwarder"},
		},
		{
			name:    "usage and CPU model unknown, no copy",
			rep:     unmeasured,
			want:    []string{"BenchmarkForwarder/mode=poll 1 1000000000 cpu-ns 39845888 peak-rss-B\n"},
			notWant: []string{"BenchmarkForwarder/mode=exact", "cpu:", "BenchmarkThroughput", "BenchmarkScale"},
		},
		{
			name: "throughput: a line per run, for benchstat's median and spread",
			rep:  sampleReport(),
			want: []string{
				"BenchmarkThroughput/path=raw-copy 100000 380000 records/s\n",
				"BenchmarkThroughput/path=raw-copy 100000 420000 records/s\n",
				"BenchmarkThroughput/path=kdelay 100000 90000 records/s\n",
				"BenchmarkThroughput/path=kdelay 100000 110000 records/s\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			if err := WriteBenchfmt(&out, tt.rep); err != nil {
				t.Fatal(err)
			}
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("no %q in:\n%s", want, out.String())
				}
			}
			for _, not := range tt.notWant {
				if strings.Contains(out.String(), not) {
					t.Errorf("%q should not be in:\n%s", not, out.String())
				}
			}
		})
	}
}

// TestBenchstatReadsScale: benchstat reads the scale lines, the drain in
// seconds.
func TestBenchstatReadsScale(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if err := WriteBenchfmt(&out, sampleScale()); err != nil {
		t.Fatal(err)
	}
	r := benchfmt.NewReader(strings.NewReader(out.String()), "scale.txt")
	drain := map[string]float64{}
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			t.Fatalf("benchstat cannot read a line: %v", r.Result())
		}
		if v, ok := res.Value("drain-sec"); ok {
			drain[string(res.Name.Full())] = v
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if got := drain["Scale/burst=1000000"]; got != 2.5 {
		t.Errorf("drain of the burst reads as %v seconds (%v), want 2.5", got, drain)
	}
}

func TestSubName(t *testing.T) {
	t.Parallel()
	for group, want := range map[string]string{
		"level=1s": "level=1s", "delay=7.3s": "delay=7.3s", "hops=2": "hops=2",
		GroupSteady: "group=steady", GroupSingleHop: "group=single-hop", GroupFloor: "group=floor",
	} {
		if got := subName(group); got != want {
			t.Errorf("subName(%q) = %q, want %q", group, got, want)
		}
	}
}
