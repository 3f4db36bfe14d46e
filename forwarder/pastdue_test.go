package forwarder

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestPastDueIsNotLateness writes a record to the ingress whose due time was
// an hour before it was written, beside one due soon: both are delivered,
// the first counted as past due, and neither reports an hour of lateness, so
// that an alert on kdelay_delivery_lateness_seconds fires for kdelay's
// lateness, not for a producer that sent an old time. Until 2026-11-25 the
// histogram recorded the hour.
func TestPastDueIsNotLateness(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	obs := &latenessBook{}
	cfg := fx.cfg
	cfg.Observer = obs
	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(cfg)
	hourAgo := time.Now().Add(-time.Hour).UnixMilli()
	fx.send("yesterday", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "yesterday",
		kdelay.HeaderDeliverAt, strconv.FormatInt(hourAgo, 10))
	fx.send("soon", kdelay.HeaderTarget, fx.target, kdelay.HeaderID, "soon", kdelay.HeaderDelay, "300")
	got := arrived.Until(20*time.Second, atLeast(2))
	if ids := kafkatest.IDs(got); len(ids) != 2 {
		t.Fatalf("delivered %v, want yesterday and soon", ids)
	}
	waitFor(t, 10*time.Second, "both deliveries observed", func() bool { return obs.count() == 2 })
	for _, late := range obs.all() {
		if late > time.Minute {
			t.Errorf("a delivery reported %s of lateness: a record written past due counts its lateness from when it was written", late)
		}
	}
	waitFor(t, 10*time.Second, "both deliveries counted", func() bool { return f.Stats().Delivered == 2 })
	if s := f.Stats(); s.PastDue != 1 {
		t.Errorf("Stats.PastDue %d, want 1: the record written an hour past due", s.PastDue)
	}
}

// latenessBook is an Observer that keeps every lateness reported.
type latenessBook struct {
	mu  sync.Mutex
	got []time.Duration
}

func (b *latenessBook) Level(string) LevelObserver { return b }
func (b *latenessBook) Handled(Outcome)            {}
func (b *latenessBook) ClientOpts() []kgo.Opt      { return nil }
func (b *latenessBook) Delivered(late time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, late)
}

func (b *latenessBook) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.got)
}

func (b *latenessBook) all() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]time.Duration(nil), b.got...)
}
