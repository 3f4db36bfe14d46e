package main

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestServeConnectionsPerBroker: a serve talks to its brokers with two
// Kafka clients, the forwarders' in their group and one outside it, and
// holds at most 5 connections a broker and 4 more (issue 21's goal; each
// client has a produce, fetch, group or slow, and other connection to a
// broker, and none of a seed's own: third_party/franz-go sends a seed's
// turn to the broker at its address), counted from its
// start until a schedule's first occurrence is delivered: the forwarders,
// the control reader, the admin listener and the scheduler have then all
// connected, and none of start-up's connections has been idle the 20 s
// after which franz-go closes it. Against a broker of the test's own, not
// the embedded one, whose sockets are serve's too.
func TestServeConnectionsPerBroker(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if e.cluster == nil {
		e.cluster = kafkatest.New(t)
		e.prefix, e.group = kafkatest.Name(t), kafkatest.Name(t)
		e.cluster.CreateTopic(e.target, 3, nil)
	}
	ports := brokerPorts(t, e.cluster)
	var peak atomic.Int64
	sampled := make(chan struct{})
	stop := make(chan struct{})
	var sampling atomic.Bool
	stopSampling := sync.OnceFunc(func() {
		close(stop)
		if sampling.Load() {
			<-sampled
		}
	})
	t.Cleanup(stopSampling) // also when the test fails before it is done
	e.started = func(pid int) {
		sampling.Store(true)
		go func() {
			defer close(sampled)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				if n, err := bench.TCPConns(pid, ports...); err == nil && int64(n) > peak.Load() {
					peak.Store(int64(n))
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
	s := e.serve()
	target := s.collect(t, e.target)
	e.run(t, "schedule", "create", "tick", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--cron", "* * * * * *", "--target", e.target, "tick")
	if got := target.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(got) > 0 }); len(got) == 0 {
		t.Fatal("no occurrence of the schedule delivered within 30s")
	}
	stopSampling()
	if limit := 5*len(ports) + 4; peak.Load() > int64(limit) {
		t.Errorf("serve held %d connections to %d broker(s) at its peak, want at most %d (5 a broker and 4 more)", peak.Load(), len(ports), limit)
	}
	t.Logf("peak: %d connections to %d broker(s)", peak.Load(), len(ports))
}

// brokerPorts are the ports of the cluster's brokers, as its metadata
// names them: where a client connects once it knows the cluster.
func brokerPorts(t *testing.T, c *kafkatest.Cluster) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers, err := kadm.NewClient(c.Client()).ListBrokers(ctx)
	if err != nil {
		t.Fatalf("list brokers: %v", err)
	}
	var ports []int
	for _, b := range brokers {
		ports = append(ports, int(b.Port))
	}
	for _, seed := range c.Brokers {
		if _, p, err := net.SplitHostPort(strings.TrimSpace(seed)); err == nil {
			if n, err := strconv.Atoi(p); err == nil && !slices.Contains(ports, n) {
				ports = append(ports, n)
			}
		}
	}
	return ports
}
