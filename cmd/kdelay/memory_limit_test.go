package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/kafkatest"
)

// TestMemoryLimit runs kdelay serve on a cluster and reads the soft memory
// limit and GOGC it gave Go's runtime from its /metrics: 3/2 of
// max-buffered-bytes, so that the heap does not double past a 128 MiB
// container under a steady load, and GOGC 200 below it, unless GOMEMLIMIT
// or GOGC say otherwise; neither with the embedded broker, whose records
// share the heap.
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	const mib = 1 << 20
	tests := []struct {
		name  string
		env   []string
		flags []string
		want  int64
		gogc  int // Go's default is 100
	}{
		{"default", nil, nil, 64 * mib * 3 / 2, gcPercent},
		{"max-buffered-bytes 256MiB", nil, []string{"--max-buffered-bytes", "256MiB"}, 256 * mib * 3 / 2, gcPercent},
		{"GOMEMLIMIT wins", []string{"GOMEMLIMIT=300MiB"}, nil, 300 * mib, 100},
		{"GOGC wins", []string{"GOGC=50"}, nil, 64 * mib * 3 / 2, 50},
		{"embedded broker: none", nil, []string{"--listen", "127.0.0.1:0", "--data-dir", "data"}, 1<<63 - 1, 100},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := name + "." + strconv.Itoa(i)
			args := []string{"serve", "--levels", "1s", "--partitions", "1", "--topic-prefix", prefix, "--group", prefix}
			if !strings.Contains(tt.name, "embedded") {
				args = append(args, "--brokers", strings.Join(cluster.Brokers, ","))
			}
			s := startServeEnv(t, bin, append([]string{"GOMEMLIMIT=", "GOGC="}, tt.env...), append(args, tt.flags...)...)
			addr := regexp.MustCompile(`admin_listening addr=(\S+)`).FindStringSubmatch(s.out.String())
			if addr == nil {
				t.Fatalf("serve did not log admin_listening with its address:\n%s", s.out)
			}
			var page string
			if !eventually(10*time.Second, func() bool {
				_, page = get(t, "http://"+addr[1]+"/metrics")
				return strings.Contains(page, "\ngo_gc_gomemlimit_bytes ")
			}) {
				t.Fatal("no go_gc_gomemlimit_bytes in /metrics")
			}
			for metric, want := range map[string]int64{"go_gc_gomemlimit_bytes": tt.want, "go_gc_gogc_percent": int64(tt.gogc)} {
				m := regexp.MustCompile(`(?m)^` + metric + ` (\S+)$`).FindStringSubmatch(page)
				if m == nil {
					t.Errorf("no %s in /metrics", metric)
					continue
				}
				if n, err := strconv.ParseFloat(m[1], 64); err != nil || n != float64(want) {
					t.Errorf("%s %s, want %d", metric, m[1], want)
				}
			}
		})
	}
}
