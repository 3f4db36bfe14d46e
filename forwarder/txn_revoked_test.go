package forwarder

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestExactlyOnceAbortAfterARevokeIsKnown: a transaction in which the group
// took partitions away is aborted by franz-go without trying to commit, and
// its outcome is not read back from the group: that read waits for the
// abort's markers, 0.1-0.6s at every rebalance of a rolling restart on the
// 3-node cluster, while every stage waits with it (issue 20).
func TestExactlyOnceAbortAfterARevokeIsKnown(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	// Long enough for the group to rebalance while the transaction is
	// open, on a loaded machine too: a rebalance takes well under 1s.
	cfg.CommitLinger, cfg.CommitInterval = 10*time.Second, 10*time.Second
	log, book := captureLogs(t)
	cfg.Logger = log
	ingress := cfg.Topics.Ingress()
	fx.cluster.CreateTopic(ingress, cfg.Partitions, nil)
	produced := fx.cluster.Collect(fx.target) // read_uncommitted: sees the open transaction
	fx.start(cfg)

	// The first transaction ends at its first produce, the second at its
	// linger: the second record waits in it.
	fx.sendDue(1)
	if book.line(30*time.Second, "transaction_committed") == "" {
		t.Fatal("the first transaction did not commit within 30s")
	}
	fx.send("open", kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0", kdelay.HeaderID, "open")
	if got := produced.Until(30*time.Second, atLeast(2)); len(got) < 2 {
		t.Fatalf("the second record was not produced within 30s (%d seen)", len(got))
	}
	// A member joins and takes the level's partitions away. The ingress
	// partition the transaction moved stays: its offset in the group
	// would tell the outcome.
	joiner := fx.cluster.Client(kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(cfg.Topics.Level("1s")),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit())
	defer joiner.Close()

	aborted := book.line(30*time.Second, "transaction_aborted")
	if aborted == "" {
		t.Fatal("the transaction open while the group took a partition away was not aborted within 30s")
	}
	if !strings.Contains(aborted, "revoked=true") {
		t.Errorf("the abort does not say the group took partitions away: %s", aborted)
	}
	if line := book.line(0, "transaction_outcome"); line != "" {
		t.Errorf("the outcome of an abort franz-go made without trying to commit was read back from the group: %s", line)
	}
}
