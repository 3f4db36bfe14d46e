package forwarder

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestFencedProducerRenews: a broker that fences the producer of a worker
// (as a coordinator that aborted a transaction past its timeout does) while
// no other process holds its instance id does not stop the forwarder: the
// worker starts again with a new producer session, and every record is
// delivered once. It stopped kdelay serve with "begin transaction:
// PRODUCER_FENCED" after a 3-node cluster lost its quorum (issue 20).
func TestFencedProducerRenews(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault to fence a producer; on a cluster, kdelay bench faults --scenarios quorum-loss --delivery exactly-once")
	}
	log, book := captureLogs(t)
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	cfg.Logger = log
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	_, done := fx.runUntilCrash(cfg)

	fence := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, TopLevel: true, Err: kerr.ProducerFenced})
	const n = 20
	fx.sendDue(n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fence.Wait(ctx, 1); err != nil {
		t.Fatalf("the forwarder ended no transaction within 20s: %v", err)
	}
	if l := book.line(20*time.Second, "transaction_session_renewed"); l == "" {
		t.Error("no transaction_session_renewed logged within 20s of the fence")
	}
	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	select {
	case <-done:
		t.Fatal("the forwarder stopped after its producer was fenced")
	default:
	}
	if ids := kafkatest.IDs(got); len(ids) != n {
		t.Fatalf("%d of %d records delivered within 30s of the fence", len(ids), n)
	}
	if ok, committed, end := fx.committedAll(cfg.Group, cfg.Topics.Ingress(), 30*time.Second); !ok {
		t.Fatalf("the ingress group committed %v of %v within 30s", committed, end)
	}
	seenOnce(t, kafkatest.IDs(arrived.Until(5*time.Second, atLeast(n+1))))
}

// TestConcurrentTransactionsRenews: a coordinator that answers the commit of
// a transaction with CONCURRENT_TRANSACTIONS for longer than its end may take
// (ShutdownTimeout), as one that has just taken over from a killed node does
// while it writes the last transaction's markers, does not stop the
// forwarder: the worker starts again with a new producer session, and every
// record is delivered once. It stopped kdelay serve with "begin transaction:
// producer ID has a fatal, unrecoverable error, err: CONCURRENT_TRANSACTIONS"
// on a 3-node cluster whose coordinator's node was killed (issue 20). In
// franz-go, as the events come:
//
//  1. End's EndTxn retries CONCURRENT_TRANSACTIONS until its ctx ends, then
//     fails the producer id with that error as is: kerr counts it not
//     retriable, which franz-go takes for the broker's final word.
//  2. The abort that follows sends nothing and succeeds: the commit's outcome
//     is unconfirmed, which franz-go settles by reloading the producer id,
//     but it only reloads an id failed as retriable.
//  3. Begin finds the id failed with an error it does not count
//     recoverable, and refuses for good.
//
// (franz-go v1.22.2 pkg/kgo: EndTransaction and maybeRecoverProducerID in
// txn.go.)
func TestConcurrentTransactionsRenews(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault to answer EndTxn; on a 3-node cluster, kdelay bench faults --scenarios node-kill --node-role txn-coordinator --delivery exactly-once")
	}
	log, book := captureLogs(t)
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	cfg.ShutdownTimeout = time.Second // how long an end of transaction may take
	// End's ctx must end while franz-go waits to try EndTxn again, not
	// while an EndTxn is in flight: that leaves the producer id to reload,
	// and Begin succeeds. After 5s of CONCURRENT_TRANSACTIONS franz-go waits
	// 1s or more between tries, so a coordinator busy for ShutdownTimeout
	// (10s by default) ends it so almost always; a wait longer than
	// ShutdownTimeout makes it so at the first refusal.
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.ConcurrentTransactionsBackoff(2*cfg.ShutdownTimeout))
	cfg.Logger = log
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	_, stop := fx.start(cfg)

	// Only the first commit and its tries again, which carry its
	// producer epoch: the renewed session's producer has a new one, and its
	// commits pass.
	var (
		mu     sync.Mutex
		pinned *kmsg.EndTxnRequest
	)
	first := func(r kmsg.Request) bool {
		req := r.(*kmsg.EndTxnRequest)
		mu.Lock()
		defer mu.Unlock()
		if pinned == nil && req.Commit {
			pinned = req
		}
		return req.Commit && req.ProducerID == pinned.ProducerID && req.ProducerEpoch == pinned.ProducerEpoch
	}
	busy := fx.cluster.Fake.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.EndTxn},
		TxnID: TransactionalID(cfg.InstanceID, cfg.Group, cfg.TransactionalIDSuffix),
		Err:   kerr.ConcurrentTransactions,
		Count: -1,
		When:  first,
	})
	const n = 20
	fx.sendDue(n)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := busy.Wait(ctx, 1); err != nil {
		t.Fatalf("the ingress committed no transaction within 20s: %v", err)
	}
	if l := book.line(20*time.Second, "transaction_session_renewed", "CONCURRENT_TRANSACTIONS"); l == "" {
		t.Fatal("no transaction_session_renewed for CONCURRENT_TRANSACTIONS logged within 20s of the first refused commit")
	}
	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	if ids := kafkatest.IDs(got); len(ids) != n {
		t.Fatalf("%d of %d records delivered within 30s of the refused commit", len(ids), n)
	}
	if ok, committed, end := fx.committedAll(cfg.Group, cfg.Topics.Ingress(), 30*time.Second); !ok {
		t.Fatalf("the ingress group committed %v of %v within 30s", committed, end)
	}
	seenOnce(t, kafkatest.IDs(arrived.Until(5*time.Second, atLeast(n+1))))
	stop() // fails the test if Run returned an error
}

// TestTakenOverStops: a second forwarder started with the instance id of a
// running one in exactly-once delivery takes its place; one of the two stops
// with an error that names the setting to change, rather than both renewing
// their producers and fencing each other for ever.
func TestTakenOverStops(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	cfg.SessionTimeout = 6 * time.Second
	run := func() <-chan error {
		f, err := New(cfg)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		stopped, done := make(chan error, 1), make(chan struct{})
		go func() {
			defer close(done)
			stopped <- f.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("a forwarder did not stop within 30s")
			}
		})
		return stopped
	}
	first := run()
	fx.send("0", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0", kdelay.HeaderID, "0")
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if got := arrived.Until(30*time.Second, atLeast(1)); len(got) < 1 {
		t.Fatal("the first forwarder delivered nothing within 30s")
	}
	second := run()
	var err error
	select {
	case err = <-first:
	case err = <-second:
	case <-time.After(60 * time.Second):
		t.Fatal("two forwarders with one instance id both still running after 60s")
	}
	if !errors.Is(err, ErrInstanceIDTaken) {
		t.Errorf("the forwarder that stopped said %v, want ErrInstanceIDTaken", err)
	}
}
