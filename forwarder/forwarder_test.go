package forwarder

import (
	"fmt"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

func TestDelivery(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	fx.start(fx.cfg)

	t.Run("headers kept in order, routing headers replaced, never early", func(t *testing.T) {
		sent := fx.send("hello", "a", "1", kdelay.HeaderTarget, fx.target, "b", "2", kdelay.HeaderDelay, "3400", "a", "3")
		got := fx.cluster.Collect(fx.target).Until(20*time.Second, atLeast(1))
		if len(got) != 1 {
			t.Fatalf("got %d records on the target, want 1", len(got))
		}
		r := got[0]
		due := sent.Timestamp.Add(3400 * time.Millisecond).Truncate(time.Millisecond)
		if at := kafkatest.DeliverAt(t, r.Record); !at.Equal(due) {
			t.Errorf("%s = %s, want the record's timestamp + 3400ms = %s", kdelay.HeaderDeliverAt, at, due)
		}
		if r.At.Before(due) {
			t.Errorf("arrived at %s, %s before it was due", r.At, due.Sub(r.At))
		}
		place := fmt.Sprintf("%s/%d/%d", sent.Topic, sent.Partition, sent.Offset)
		if id, _ := kafkatest.Header(r.Record, kdelay.HeaderID); id != place {
			t.Errorf("%s = %q, want the ingress record's place %q", kdelay.HeaderID, id, place)
		}
		var keys []string
		for _, h := range r.Headers {
			keys = append(keys, h.Key+"="+string(h.Value))
		}
		t.Logf("late by %s, headers %v", r.At.Sub(due), keys)
	})
}
