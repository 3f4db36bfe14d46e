package forwarder

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// fetchCounter counts the fetch requests its clients write.
type fetchCounter struct{ n *atomic.Int64 }

func (c fetchCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == int16(kmsg.Fetch) {
		c.n.Add(1)
	}
}

// TestPollsArePaced: records written to the ingress one request at a time,
// as fast as the broker takes them, are all delivered, and kdelay's clients
// send no more fetches meanwhile than its poll loop, pollPace apart, lets
// them (one a broker per poll, and one per FetchMaxWait that brings
// nothing). Before the pace the client fetched again the moment anything
// arrived, about once a record: at a steady rate, serve's CPU went on
// fetches of one or two records (docs/BENCHMARKS.md, "Fetches at a steady
// rate").
func TestPollsArePaced(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	var fetches atomic.Int64
	cfg := fx.cfg
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithHooks(fetchCounter{&fetches}))
	arrived := fx.cluster.Collect(fx.target)
	fx.start(cfg)
	// The first record pays for connections, metadata and fetch sessions.
	fx.sendDue(1)
	arrived.Until(30*time.Second, func(a []kafkatest.Arrival) bool { return len(a) >= 1 })

	const n = 1000
	before, start := fetches.Load(), time.Now()
	for i := range n {
		fx.send(strconv.Itoa(i), kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0", kdelay.HeaderID, "paced-"+strconv.Itoa(i))
	}
	got := arrived.Until(30*time.Second, func(a []kafkatest.Arrival) bool { return len(a) >= n+1 })
	took, sent := time.Since(start), fetches.Load()-before
	if len(got) != n+1 {
		t.Fatalf("%d of %d records delivered within 30s", len(got), n+1)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	meta, err := kadm.NewClient(fx.cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	brokers := int64(len(meta.Brokers))
	// Per broker: a fetch a poll, polls pollPace apart, half as many again
	// for what the count does not foresee (a fetch session the broker
	// evicted is fetched again at once); a fetch every FetchMaxWait that
	// brings nothing; the one in flight at each end; and the control
	// reader's long polls (5s), a few at most. Without the pace, 2.3 to 6.3
	// times this was sent (Apache Kafka 4.4, kfake).
	limit := brokers*(int64(took/pollPace)*3/2+int64(took/DefaultFetchMaxWait)+2) + 5
	if sent > limit {
		t.Errorf("%d fetch requests while %d records, written one request each, were delivered over %s: want at most %d, a poll every %s",
			sent, n, took.Round(time.Millisecond), limit, pollPace)
	}
	t.Logf("%d fetch requests for %d records over %s (limit %d)", sent, n, took.Round(time.Millisecond), limit)
}
