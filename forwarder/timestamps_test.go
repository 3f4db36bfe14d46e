package forwarder

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestLevelTimestamps proves the choice of CreateTime for level topics: the
// head of a level partition is due at its timestamp plus the level, and the
// timestamp is set by whoever planned the hop. Two producers whose clocks
// disagree — one 700ms behind, one 400ms ahead — interleave records in one
// level partition; their timestamps are not in order there, yet no record is
// delivered before its due time: a timestamp only decides when a record is
// looked at again, and delivery waits for kdelay-deliver-at.
//
// It runs on kfake and, with KDELAY_TEST_BROKERS, on a real broker, which
// stores the producers' CreateTime as written.
func TestLevelTimestamps(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	level := fx.cfg.Topics.Level("2s")
	fx.cluster.CreateTopic(level, 1, map[string]*string{"message.timestamp.type": ptr("CreateTime")})
	arrived := fx.cluster.Collect(fx.target)
	fx.start(fx.cfg)

	behind := fx.cluster.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ahead := fx.cluster.Client(kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 60
	due := map[string]time.Time{}
	for i := range n {
		cl, skew := behind, -700*time.Millisecond
		if i%2 == 1 {
			cl, skew = ahead, 400*time.Millisecond
		}
		now := time.Now()
		// Each producer plans with its own clock: it believes 2.5s remain
		// and picks the 2s level, stamping the record with its own now.
		d := 2500*time.Millisecond + time.Duration(i)*20*time.Millisecond
		id := strconv.Itoa(i)
		r := levelRecord(fx.cfg, "2s", fx.target, id, now.Add(skew), now.Add(skew).Add(d))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		cancel()
		due[id] = now.Add(skew).Add(d).Truncate(time.Millisecond)
	}
	got := arrived.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) == n })
	if ids := len(kafkatest.IDs(got)); ids != n {
		t.Fatalf("%d of %d records delivered within 30s", ids, n)
	}
	var maxLate time.Duration
	for _, a := range got {
		id, _ := kafkatest.Header(a.Record, kdelay.HeaderID)
		late := a.At.Sub(due[id])
		if late < 0 {
			t.Errorf("record %s (clock %s) arrived %s early", id, map[bool]string{true: "behind", false: "ahead"}[a.Value[len(a.Value)-1]%2 == 0], -late)
		}
		maxLate = max(maxLate, late)
	}
	t.Logf("%d records from two skewed clocks, none early, max lateness %s", n, maxLate)
}
