package forwarder

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestCommandsOnBroker runs every command on the real clock against the
// test broker, Apache Kafka when KDELAY_TEST_BROKERS names one: the bubble
// tests (command_test.go) say when records arrive to the millisecond; this
// one says the same commands work through a real broker's compaction,
// timestamps and offsets. Lateness here is the machine's, so it is only
// bounded loosely; early is never allowed.
//
// In exactly-once delivery a drop, a mark and a copy moved ahead are part of
// a transaction, and a read_committed consumer sees each record once. (Not
// in a synctest bubble: franz-go's transaction session waits on a mutex
// there, which does not let the bubble's clock move.)
func TestCommandsOnBroker(t *testing.T) {
	t.Parallel()
	for _, d := range []Delivery{AtLeastOnce, ExactlyOnce} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			commandsOnBroker(t, d)
		})
	}
}

func commandsOnBroker(t *testing.T, d Delivery) {
	fx := setup(t, []string{"1s", "2s", "20s"})
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	fx.cfg.Delivery = d
	fx.cfg.InstanceID = kafkatest.Name(t)
	f, _ := fx.start(fx.cfg)

	// 40s goes into the 20s level first, where it stays 20 seconds: longer
	// than the new times below, so those must find it there.
	send := func(id string, d time.Duration) time.Time {
		r := fx.send(id, kdelay.HeaderTarget, fx.target, kdelay.HeaderID, id, kdelay.HeaderDelay, d.String())
		return r.Timestamp.Truncate(time.Millisecond).Add(d)
	}
	command := func(id, name string, headers ...string) time.Time {
		r := &kgo.Record{Topic: fx.cfg.Topics.Control(), Key: []byte(id), Value: []byte{},
			Headers: []kgo.RecordHeader{{Key: kdelay.HeaderCommand, Value: []byte(name)}}}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: headers[i], Value: []byte(headers[i+1])})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := fx.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("write command: %v", err)
		}
		return r.Timestamp.Truncate(time.Millisecond)
	}
	send("cancelled", 40*time.Second)
	send("earlier", 40*time.Second)
	send("now", 40*time.Second)
	// Long enough that the command below comes before its old due time
	// however slow the machine is to get the others into the 20s level.
	send("later", 30*time.Second)
	witness := send("witness", 50*time.Second)
	waitFor(t, 10*time.Second, "the records to reach the 20s level", func() bool {
		return fx.records(fx.cfg.Topics.Level("20s")) >= 5
	})

	command("cancelled", kdelay.CommandCancel)
	earlier := command("earlier", kdelay.CommandReschedule, kdelay.HeaderDelay, "4s").Add(4 * time.Second)
	later := command("later", kdelay.CommandReschedule, kdelay.HeaderDelay, "35s").Add(35 * time.Second)
	now := command("now", kdelay.CommandRunNow)

	got := arrived.Until(time.Until(witness)+30*time.Second, func(as []kafkatest.Arrival) bool {
		return slices.ContainsFunc(as, func(a kafkatest.Arrival) bool { return string(a.Value) == "witness" })
	})
	at := map[string][]time.Time{}
	for _, a := range got {
		at[string(a.Value)] = append(at[string(a.Value)], a.At)
	}
	if at["witness"] == nil {
		t.Fatalf("the witness, due %s, did not arrive within 30s of it; arrived: %v", witness, at)
	}
	if at["cancelled"] != nil {
		t.Errorf("cancelled arrived at %v", at["cancelled"])
	}
	for id, due := range map[string]time.Time{"earlier": earlier, "later": later, "now": now} {
		switch a := at[id]; {
		case len(a) != 1:
			t.Errorf("%s arrived %d times, want once at %s", id, len(a), due)
		case a[0].Before(due):
			t.Errorf("%s arrived %s before its new due time", id, due.Sub(a[0]))
		case a[0].Sub(due) > 5*time.Second: // plus a CommitInterval in exactly-once
			t.Errorf("%s arrived %s after its new due time; its old one was %s away", id, a[0].Sub(due), 40*time.Second)
		}
	}
	if s := f.Commands(); s.Matched < 4 || s.Cancelled != 1 {
		t.Errorf("Commands() = %+v, want 4 matched, 1 cancelled", s)
	}
}

// TestRunNowInOpenTransaction runs a command for a record that sits in a
// level in a transaction not yet committed: exactly-once commits every
// CommitInterval and CommitLinger, here 5 s, so a scan that stopped at the last stable offset
// missed it and the record came at its old time, 20 s later.
func TestRunNowInOpenTransaction(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "20s"})
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	fx.cfg.Delivery = ExactlyOnce
	fx.cfg.CommitInterval = 5 * time.Second
	fx.cfg.CommitLinger = 5 * time.Second
	fx.cfg.InstanceID = kafkatest.Name(t)
	fx.start(fx.cfg)

	// The ingress router's first transaction commits at once; the next
	// one, which carries "now", stays open until 5 s after it.
	fx.send("first", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "first", kdelay.HeaderDelay, "40s")
	waitFor(t, 4*time.Second, "the first record to be written to the 20s level", func() bool {
		return fx.records(fx.cfg.Topics.Level("20s")) >= 1
	})
	// Seen by a read_uncommitted reader: in the level, its transaction
	// open. (Counting offsets would count the first one's commit marker.)
	level := fx.cluster.Collect(fx.cfg.Topics.Level("20s"))
	fx.send("now", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "now", kdelay.HeaderDelay, "40s")
	if got := level.Until(10*time.Second, func(got []kafkatest.Arrival) bool { return kafkatest.IDs(got)["now"] > 0 }); kafkatest.IDs(got)["now"] == 0 {
		t.Fatalf("the record was not written to the 20s level within 10s")
	}
	r := &kgo.Record{Topic: fx.cfg.Topics.Control(), Key: []byte("now"), Value: []byte{},
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderCommand, Value: []byte(kdelay.CommandRunNow)}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fx.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("write command: %v", err)
	}
	due := r.Timestamp.Truncate(time.Millisecond)
	got := arrived.Until(30*time.Second, atLeast(1))
	switch {
	case len(got) != 1 || string(got[0].Value) != "now":
		t.Fatalf("%d records arrived within 30s of the run-now, want the one it names", len(got))
	case got[0].At.Before(due):
		t.Errorf("arrived %s before the run-now", due.Sub(got[0].At))
	case got[0].At.Sub(due) > 15*time.Second:
		t.Errorf("arrived %s after the run-now: at its old time, not moved ahead", got[0].At.Sub(due))
	}
}
