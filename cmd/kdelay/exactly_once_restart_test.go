package main

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestExactlyOnceRestartResumesAtOnce: `kdelay serve --delivery
// exactly-once` is SIGKILLed as the ingress's transaction commits, after
// its offsets went into the transaction and before the commit that ends
// it: the worst moment, since a consumer group whose offsets a transaction
// holds hands them to no member until the transaction ends (KIP-447,
// franz-go always asks for stable offsets). Restarted at once with the same
// instance id, serve must abort that transaction itself, as its producer
// starts, and deliver what waits within seconds: waiting for the broker to
// time it out takes the transaction timeout, 50 s with --commit-interval 5s
// (10 commit intervals), during which no record from the ingress is
// delivered. The kill is targeted, so the test runs on kfake only.
func TestExactlyOnceRestartResumesAtOnce(t *testing.T) {
	t.Parallel()
	x := setupExactlyOnce(t)
	if x.cluster.Fake == nil {
		t.Skip("kills serve at the commit of a transaction, which kfake lets the test do; on a cluster kdelay bench faults kills nodes instead")
	}
	x.args = append(x.args, "--commit-interval", "5s")
	var armed atomic.Bool
	var s atomic.Pointer[process]
	killed := make(chan struct{})
	txnID := forwarder.TransactionalID("eos", x.name, "")
	x.cluster.Fake.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		end, ok := req.(*kmsg.EndTxnRequest)
		if !ok || !end.Commit || end.TransactionalID != txnID || !armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		if err := s.Load().cmd.Process.Kill(); err != nil {
			t.Errorf("SIGKILL: %v", err)
		}
		close(killed)
		return nil, errors.New("killed"), true // closes the connection: the commit is dropped
	})

	s.Store(x.start())
	cl := x.cluster.Client(kgo.ProducerLinger(0))
	x.send(cl, "warm-up", 0)
	if got := x.got.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(got) > 0 }); len(got) == 0 {
		t.Fatal("the warm-up record was not delivered within 30s")
	}
	armed.Store(true)
	x.send(cl, "in-killed-transaction", 0)
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("the ingress committed no transaction within 30s of a record written to it")
	}
	<-s.Load().exited
	s.Store(x.start())
	restarted := time.Now()
	x.send(cl, "after-restart", 0)

	const within = 20 * time.Second
	got := x.got.Until(within, func(got []kafkatest.Arrival) bool {
		ids := kafkatest.IDs(got)
		return ids["in-killed-transaction"] > 0 && ids["after-restart"] > 0
	})
	ids := kafkatest.IDs(got)
	for _, id := range []string{"warm-up", "in-killed-transaction", "after-restart"} {
		switch n := ids[id]; {
		case n == 0:
			t.Errorf("%s was not delivered within %s of the restart: the restarted serve waited for the broker to time out the transaction of the killed one", id, within)
		case n > 1:
			t.Errorf("%s delivered %d times, want exactly once", id, n)
		}
	}
	for _, a := range got {
		if id, _ := kafkatest.Header(a.Record, kdelay.HeaderID); id != "warm-up" {
			t.Logf("%s delivered %s after the restart", id, a.At.Sub(restarted).Round(time.Millisecond))
		}
	}
}
