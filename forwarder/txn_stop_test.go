package forwarder

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/kdelay/kdelay/kafkatest"
)

// franzCommitPause is what franz-go logs when End committed a transaction
// that sent no offsets: without a TxnOffsetCommit answer it cannot tell that
// the broker runs KIP-447, and holds the session's lock for 500ms (txn.go,
// GroupTransactSession.End). Every rebalance callback waits for that lock,
// the client's leave at Close with them.
const franzCommitPause = "sleeping 500ms before allowing a rebalance"

// TestExactlyOnceStopsWithoutTheCommitPause: a clean stop whose last
// transaction holds nothing does not commit it. Committing it held the
// client's leave back 500ms at every stop, and the process's partitions
// with it: in a rolling restart of three processes on the 3-node cluster
// the stopping process left its group 640-680ms after SIGTERM, against
// about 120ms when its last transaction held records (issue 20).
func TestExactlyOnceStopsWithoutTheCommitPause(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	cfg.Delivery = ExactlyOnce
	cfg.InstanceID = kafkatest.Name(t)
	clientLog, book := captureLogs(t)
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithLogger(kslog.New(clientLog)))
	fx.cluster.CreateTopic(cfg.Topics.Ingress(), cfg.Partitions, nil)
	arrived := fx.cluster.Collect(fx.target, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	_, stop := fx.start(cfg)

	fx.sendDue(1)
	if got := arrived.Until(30*time.Second, atLeast(1)); len(got) != 1 {
		t.Fatalf("%d records committed within 30s, want 1", len(got))
	}
	// Its transaction is committed: the one open at the stop holds nothing.
	stop()
	if line := book.line(0, franzCommitPause); line != "" {
		t.Errorf("the stop committed a transaction that held nothing, and franz-go held the session for it: %s", line)
	}
}
