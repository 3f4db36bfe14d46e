package forwarder

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
)

// TestDeliveryTimeout makes the target refuse every produce with an error
// worth retrying and checks that the record goes to the DLQ with that error
// once DeliveryTimeout has passed, that the record behind it is delivered
// meanwhile, and that its offset is then committed.
func TestDeliveryTimeout(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault to make the broker refuse one topic's produces with a retryable error")
	}
	other := fx.target + ".other"
	fx.cluster.CreateTopic(other, 1, nil)
	fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: fx.target, Err: kerr.NotEnoughReplicas, Count: -1})
	cfg := fx.cfg
	cfg.DeliveryTimeout = 2 * time.Second
	fx.start(cfg)

	sent := fx.send("stuck", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
	fx.send("behind", kdelay.HeaderTarget, other, kdelay.HeaderDelay, "0")
	behind := fx.cluster.Collect(other).Until(10*time.Second, atLeast(1))
	if len(behind) != 1 {
		t.Errorf("the record behind the stuck one was not delivered within 10s")
	}
	dead := fx.cluster.Collect(fx.cfg.Topics.DLQ()).Until(30*time.Second, atLeast(1))
	if len(dead) != 1 {
		t.Fatalf("%d records in the DLQ within 30s, want the one the target kept refusing", len(dead))
	}
	reason := headerValue(dead[0].Record, kdelay.HeaderError)
	for _, want := range []string{"delivery-timeout 2s", "NOT_ENOUGH_REPLICAS", fx.target} {
		if !strings.Contains(reason, want) {
			t.Errorf("%s = %q, want it to contain %q", kdelay.HeaderError, reason, want)
		}
	}
	if src := headerValue(dead[0].Record, kdelay.HeaderSource); src != source(sent) {
		t.Errorf("%s = %q, want %q", kdelay.HeaderSource, src, source(sent))
	}
	if ok, committed, end := fx.committedAll(stageGroup(fx.cfg, fx.cfg.Topics.Ingress()), fx.cfg.Topics.Ingress(), 10*time.Second); !ok {
		t.Errorf("ingress group committed %v, want the end offsets %v once the record was dead-lettered", committed, end)
	}
}

// TestDeadLetterRefused makes the DLQ refuse every write and checks what
// kdelay promises then: the dead letter is retried and logged at error, the
// records behind it are delivered, its offset is not committed (a restart
// re-reads it rather than losing it), and once the DLQ takes writes again it
// lands there and the commit catches up.
func TestDeadLetterRefused(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault to make the broker refuse writes to the DLQ")
	}
	fault := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: fx.cfg.Topics.DLQ(), Err: kerr.TopicAuthorizationFailed, Count: -1})
	cfg := fx.cfg
	var logs *logBook
	cfg.Logger, logs = captureLogs(t)
	fx.start(cfg)

	bad := fx.send("bad", kdelay.HeaderDelay, "0") // no target
	for range 5 {
		fx.send("good", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
	}
	if got := fx.cluster.Collect(fx.target).Until(10*time.Second, atLeast(5)); len(got) != 5 {
		t.Errorf("%d of the 5 records behind the refused dead letter delivered within 10s", len(got))
	}
	if logs.line(10*time.Second, "level=ERROR", "msg=produce_failed", "to="+fx.cfg.Topics.DLQ(), "TOPIC_AUTHORIZATION_FAILED") == "" {
		t.Errorf("no error logged within 10s for the dead letter the DLQ refused")
	}
	if ok, committed, _ := fx.committedAll(stageGroup(fx.cfg, fx.cfg.Topics.Ingress()), fx.cfg.Topics.Ingress(), time.Second); ok || committed[bad.Partition] > bad.Offset {
		t.Errorf("ingress group committed %v while the dead letter of %s was not written, want at most offset %d on partition %d",
			committed, source(bad), bad.Offset, bad.Partition)
	}

	fault.Remove()
	dead := fx.cluster.Collect(fx.cfg.Topics.DLQ()).Until(60*time.Second, atLeast(1))
	if len(dead) != 1 || headerValue(dead[0].Record, kdelay.HeaderSource) != source(bad) {
		t.Fatalf("%d records in the DLQ within 60s of it taking writes again, want the refused dead letter", len(dead))
	}
	if ok, committed, end := fx.committedAll(stageGroup(fx.cfg, fx.cfg.Topics.Ingress()), fx.cfg.Topics.Ingress(), 10*time.Second); !ok {
		t.Errorf("ingress group committed %v, want the end offsets %v once the dead letter was written", committed, end)
	}
}
