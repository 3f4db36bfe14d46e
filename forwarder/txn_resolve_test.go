package forwarder

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestOutcomeWaitsOnlyForItsOwnPartitions: reading an unconfirmed commit's
// outcome waits while a partition the transaction tried is pending in a
// transaction, and not while another process's is: in a fleet, some other
// process's transaction is open at almost any moment, and waiting for them
// held a process's every stage 1s in a rolling restart (the outcome read
// backing off 100ms, 200ms, 400ms, 800ms on UNSTABLE_OFFSET_COMMIT).
func TestOutcomeWaitsOnlyForItsOwnPartitions(t *testing.T) {
	const topic = "ingress"
	got := func(pendingPart int32) kadm.OffsetResponses {
		r := kadm.OffsetResponses{topic: {}}
		for p := range int32(3) {
			o := kadm.OffsetResponse{Offset: kadm.Offset{Topic: topic, Partition: p, At: 10}}
			if p == pendingPart {
				o.Err = kerr.UnstableOffsetCommit
			}
			r[topic][p] = o
		}
		return r
	}
	tried := map[int32]txnPoint{0: {}, 2: {}}
	if err := unstable(got(1), topic, tried); err != nil {
		t.Errorf("partition 1, which the transaction did not try, pending: %v, want no wait", err)
	}
	if err := unstable(got(2), topic, tried); err == nil {
		t.Error("partition 2, which the transaction tried, pending: no error, want a wait for it")
	}
}
