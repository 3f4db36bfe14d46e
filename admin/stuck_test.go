package admin

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestStuckNotReady: a level that holds a record past its due time and hands
// nothing on for stuck-after makes /readyz answer 503 saying why, and
// kdelay_stuck 1 with the reason; once the record goes, both clear.
func TestStuckNotReady(t *testing.T) {
	t.Parallel()
	// Before setup: the admin Server it makes holds a Kafka client that
	// only Run closes, and a test that skips never runs it (goleak then
	// fails the package). A real broker shared by the tests is not one to
	// stop, and while it serves it takes a produce a topic's
	// min.insync.replicas forbids: it caps that at the topic's replicas.
	if os.Getenv(kafkatest.EnvBrokers) != "" {
		t.Skip("needs kfake's Fault to fail every produce to the target, whatever " + kafkatest.EnvBrokers + " says")
	}
	fx := setupWith(t, func(c *forwarder.Config) { c.StuckAfter = time.Second })
	refuse := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: fx.target, Err: kerr.NotEnoughReplicas, Count: -1})
	fx.run(fx.srv.Run)
	fx.run(fx.fwd.Run)
	fx.waitStatus("/readyz", http.StatusOK, 30*time.Second)

	r := &kgo.Record{Topic: fx.fcfg.Topics.Ingress(), Value: []byte("v"), Headers: []kgo.RecordHeader{
		{Key: kdelay.HeaderTarget, Value: []byte(fx.target)}, {Key: kdelay.HeaderDelay, Value: []byte("0")}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fx.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce to the ingress: %v", err)
	}
	// Stuck after a second; the produce's error comes once the client has
	// given up its own retries, seconds later.
	var body string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && !strings.Contains(body, "produce"); {
		body = fx.waitStatus("/readyz", http.StatusServiceUnavailable, 30*time.Second)
		time.Sleep(50 * time.Millisecond) // a deadline-bounded poll
	}
	for _, want := range []string{"level ingress is stuck", "produce", "NOT_ENOUGH_REPLICAS"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz says %q, want it to say %q", body, want)
		}
	}
	if n, _ := value(fx.scrape(), "kdelay_stuck", map[string]string{"level": "ingress", "reason": forwarder.StuckProduce}); n != 1 {
		t.Errorf("kdelay_stuck{level=ingress,reason=produce} = %v while the target refuses, want 1", n)
	}

	refuse.Remove()
	fx.waitStatus("/readyz", http.StatusOK, 60*time.Second)
	if n, _ := value(fx.scrape(), "kdelay_stuck", map[string]string{"level": "ingress"}); n != 0 {
		t.Errorf("kdelay_stuck{level=ingress} = %v once the record went, want 0", n)
	}
}
