package forwarder

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
)

// TestFullClientBufferDoesNotBlock: a target that does not answer fills
// the client's produce buffer (MaxBufferedRecords, made small here), and
// the forwarder's loop goes on all the same — Stats, which waits for it,
// answers — rather than waiting inside a produce for room that only the
// stalled target can make. Once the target answers, every record is
// delivered: what the client refused is tried again.
func TestFullClientBufferDoesNotBlock(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s", "2s"})
	if fx.cluster.Real() {
		t.Skip("needs kfake's Control to hold the target's produce requests; a real broker answers them")
	}
	release := make(chan struct{})
	fake := fx.cluster.Fake
	// Produce names a topic by its id since version 13.
	id := fake.TopicInfo(fx.target).TopicID
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if tp.Topic == fx.target || tp.TopicID == id {
				fake.SleepControl(func() { <-release })
			}
		}
		return nil, nil, false // then the broker answers it as usual
	})
	var once bool
	unblock := func() {
		if !once {
			once = true
			close(release)
		}
	}
	cfg := fx.cfg
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.MaxBufferedRecords(3))
	arrived := fx.cluster.Collect(fx.target)
	f, _ := fx.start(cfg)
	t.Cleanup(unblock) // before the forwarder stops: cleanups run last first

	const sent = 20
	for i := range sent {
		fx.send(string(rune('a'+i)), kdelay.HeaderTarget, fx.target, kdelay.HeaderDelay, "0")
	}
	// Stats waits for the loop, which may be stuck: ask it on the side.
	stats := func() (Stats, bool) {
		answered := make(chan Stats, 1)
		go func() { answered <- f.Stats() }()
		select {
		case s := <-answered:
			return s, true
		case <-time.After(5 * time.Second):
			return Stats{}, false
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, ok := stats()
		if !ok {
			t.Fatal("Stats did not answer within 5s while the target stalled: the loop waits inside a produce")
		}
		if s.Retried > 0 {
			break // the client refused a record, and the loop went on
		}
		if time.Now().After(deadline) {
			t.Fatal("no produce refused for a full client buffer within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	unblock()
	if got := arrived.Until(30*time.Second, atLeast(sent)); len(got) != sent {
		t.Errorf("%d of %d records delivered within 30s of the target answering again", len(got), sent)
	}
}
