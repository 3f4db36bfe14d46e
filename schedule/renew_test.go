package schedule

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestSchedulerFencedRenews: a broker that fences the scheduler's producer
// while no other process holds its instance id (as a coordinator that
// aborted a transaction past its timeout does) does not stop the
// scheduler: it connects again with a new producer session, and the
// occurrences go on, each delivered once and none skipped.
func TestSchedulerFencedRenews(t *testing.T) {
	t.Parallel()
	inBubble(t, true, func(b *bubble) {
		target := b.collect("")
		b.schedule("s", []byte("v"), kdelay.HeaderSchedule, "@every 30s", kdelay.HeaderTarget, b.target)
		fence := b.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, TopLevel: true, Err: kerr.ProducerFenced})
		stop := b.run(b.cfg)
		got := target.Until(5*time.Minute, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) >= 5 })
		if fence.Hits() == 0 {
			t.Fatal("the scheduler ended no transaction")
		}
		if err := stop(); err != nil {
			t.Fatalf("Run after its producer was fenced: %v", err)
		}
		ids := kafkatest.IDs(got)
		if len(ids) < 5 || !consecutive(slices.Collect(maps.Keys(ids)), 30*time.Second) {
			t.Errorf("ids %v, want five or more occurrences 30s apart, none skipped", ids)
		}
		for id, n := range ids {
			if n > 1 {
				t.Errorf("%s delivered %d times to a read_committed reader, want once", id, n)
			}
		}
	})
}
