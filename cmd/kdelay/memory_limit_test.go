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
// limit it gave Go's runtime from its /metrics: 3/2 of
// max-buffered-bytes, so that the heap does not double past a 128 MiB
// container under a steady load, unless GOMEMLIMIT says otherwise; none with
// the embedded broker, whose records share the heap.
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
	}{
		{"default", nil, nil, 64 * mib * 3 / 2},
		{"max-buffered-bytes 256MiB", nil, []string{"--max-buffered-bytes", "256MiB"}, 256 * mib * 3 / 2},
		{"GOMEMLIMIT wins", []string{"GOMEMLIMIT=300MiB"}, nil, 300 * mib},
		{"embedded broker: none", nil, []string{"--listen", "127.0.0.1:0", "--data-dir", "data"}, 1<<63 - 1},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := name + "." + strconv.Itoa(i)
			args := []string{"serve", "--levels", "1s", "--partitions", "1", "--topic-prefix", prefix, "--group", prefix}
			if !strings.Contains(tt.name, "embedded") {
				args = append(args, "--brokers", strings.Join(cluster.Brokers, ","))
			}
			s := startServeEnv(t, bin, append([]string{"GOMEMLIMIT="}, tt.env...), append(args, tt.flags...)...)
			addr := regexp.MustCompile(`admin_listening addr=(\S+)`).FindStringSubmatch(s.out.String())
			if addr == nil {
				t.Fatalf("serve did not log admin_listening with its address:\n%s", s.out)
			}
			limit := regexp.MustCompile(`(?m)^go_gc_gomemlimit_bytes (\S+)$`)
			var got string
			if !eventually(10*time.Second, func() bool {
				_, page := get(t, "http://"+addr[1]+"/metrics")
				m := limit.FindStringSubmatch(page)
				if m != nil {
					got = m[1]
				}
				return m != nil
			}) {
				t.Fatal("no go_gc_gomemlimit_bytes in /metrics")
			}
			if n, err := strconv.ParseFloat(got, 64); err != nil || n != float64(tt.want) {
				t.Errorf("go_gc_gomemlimit_bytes %s, want %d", got, tt.want)
			}
		})
	}
}
