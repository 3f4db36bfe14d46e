package forwarder

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControlTopicNotServedYet: a broker that does not serve the control
// topic yet when kdelay reads where it ends (on a cluster, the leader of a
// partition created a moment ago) is asked again; kdelay starts. It stopped
// kdelay serve at start on a 3-node cluster.
func TestControlTopicNotServedYet(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Fault to refuse ListOffsets")
	}
	notYet := fx.cluster.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: fx.cfg.Topics.Control(), Err: kerr.UnknownTopicOrPartition, Count: 3})
	fx.start(fx.cfg) // fails the test if Run returns before it is ready
	if n := notYet.Hits(); n != 3 {
		t.Errorf("ListOffsets of the control topic refused %d times, want 3", n)
	}
}
