package bench

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// TestSoak runs a short soak on an in-process kfake broker against a
// forwarder and its admin listener in this process, attached as a running
// kdelay serve: every figure is read, every record due within the run
// arrives once and none early, and the report renders. Slopes and
// lateness depend on the machine: not asserted.
func TestSoak(t *testing.T) {
	t.Parallel()
	brokers, running, adminAddr, set := setupSoak(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rep, err := Soak(ctx, SoakConfig{
		Brokers: brokers, Runner: running, Admin: adminAddr,
		Rate: 50, MinDelay: 100 * time.Millisecond, MaxDelay: 3 * time.Second,
		Duration: 6 * time.Second, Interval: time.Second, Warmup: time.Second, Levels: set, Partitions: 2, Grace: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("Soak: %v", err)
	}
	if rep.Error != "" {
		t.Fatalf("the run ended early: %s", rep.Error)
	}

	t.Run("a sample every interval, each figure read", func(t *testing.T) {
		if len(rep.Samples) != 7 {
			t.Errorf("%d samples, want 7: at 0s, 1s, ... 6s", len(rep.Samples))
		}
		for _, s := range rep.Samples {
			p := s.Serve
			if s.Error != "" || p.RSS <= 0 || p.HeapInuse <= 0 || p.HeapLive <= 0 || p.Goroutines <= 0 || p.OpenFDs <= 0 || p.TCPConns <= 0 || p.CPU <= 0 {
				t.Errorf("sample at %s: %+v (%s), want every figure read", s.At, p, s.Error)
			}
		}
	})
	t.Run("every record due within the run arrives once, none early", func(t *testing.T) {
		due := rep.Groups[0]
		if due.Name != GroupDueInRun || due.Sent == 0 || due.Delivered != due.Sent || due.Duplicates != 0 || due.Early != 0 {
			t.Errorf("%+v, want every record delivered once, none early", due)
		}
		for _, g := range rep.Goals {
			if strings.Contains(g.Name, "records") && !g.Met {
				t.Errorf("goal %+v missed", g)
			}
		}
	})
	t.Run("trends and outputs", func(t *testing.T) {
		for _, name := range []string{TrendRSS, TrendHeapLive, "TCP connections"} {
			if _, ok := rep.Trend(name); !ok {
				t.Errorf("no trend of %s in %+v", name, rep.Trends)
			}
		}
		var table, csv, svg strings.Builder
		if err := WriteSoakTable(&table, rep); err != nil || !strings.Contains(table.String(), "live heap growth after warm-up") {
			t.Errorf("table: %v\n%s", err, table.String())
		}
		if err := WriteSoakCSV(&csv, rep); err != nil || strings.Count(csv.String(), "\n") != 8 {
			t.Errorf("CSV: %v, want a header and 7 rows:\n%s", err, csv.String())
		}
		if err := WriteSoakSVG(&svg, rep); err != nil || strings.Count(svg.String(), "<polyline") != 3 {
			t.Errorf("SVG: %v, want 3 lines", err)
		}
	})
}

// setupSoak starts a kfake broker, and a forwarder on levels 1s and 2s
// with its admin listener, as a kdelay serve runs them; all stop when the
// test ends. It returns the brokers, the forwarder as a Running, the
// listener's address and the levels.
func setupSoak(t *testing.T) ([]string, Running, string, levels.Set) {
	t.Helper()
	set, err := levels.Parse([]string{"1s", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	// Auto-creation, as kdelay serve's own broker does: the soak deletes its
	// target at its end, while records due later are still on their way.
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(2), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	brokers := fake.ListenAddrs()
	running := Running{Topics: kdelay.Topics{Prefix: "soak-test"}, Group: "soak-test", PID: os.Getpid()}
	metrics := admin.NewMetrics()
	f, err := forwarder.New(forwarder.Config{
		Brokers: brokers, Topics: running.Topics, Group: running.Group, Levels: set, Partitions: 2, Observer: metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := admin.New(admin.Config{Addr: "127.0.0.1:0", Forwarder: f, Metrics: metrics, Brokers: brokers})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx) })
	wg.Go(func() { _ = srv.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return brokers, running, srv.Addr(), set
}
