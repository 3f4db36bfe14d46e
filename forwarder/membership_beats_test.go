package forwarder

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMembersHearOfAJoinAndALeaveAtOnce: a process that joins or leaves the
// group says so on the control topic, and the others beat at once rather
// than at their interval, so the group rebalances without waiting for it. The
// members here beat 40s apart: one that waited for its heartbeat would
// learn of the other's join, or leave, up to 40s later, and its
// partitions would wait that long.
func TestMembersHearOfAJoinAndALeaveAtOnce(t *testing.T) {
	t.Parallel()
	fx := setup(t, []string{"1s"})
	cfg := fx.cfg
	cfg.Partitions = 4
	cfg.SessionTimeout = 2 * time.Minute
	cfg.ClientOpts = append(cfg.ClientOpts, kgo.HeartbeatInterval(40*time.Second)) // under the other clients' 45s session
	first, second := cfg, cfg
	first.InstanceID, second.InstanceID = "first", "second"
	ingress := cfg.Topics.Ingress()
	stays, _ := fx.start(first)
	waitFor(t, 30*time.Second, "the first forwarder to own every ingress partition", func() bool {
		return len(stays.owners.of(ingress)) == int(cfg.Partitions)
	})
	// Its own rebalance made it beat quickly for a while; the join must
	// be heard of by its notice.
	calm(t, stays)
	joins, stop := fx.start(second)
	waitFor(t, 20*time.Second, "the second forwarder to be given ingress partitions (the first heard of its join)", func() bool {
		return len(joins.owners.of(ingress)) > 0
	})
	calm(t, stays)
	stop()
	waitFor(t, 20*time.Second, "the first forwarder to take every ingress partition back (it heard of the second's leave)", func() bool {
		return len(stays.owners.of(ingress)) == int(cfg.Partitions)
	})
}

// calm waits until f has sent no heartbeat ahead of its interval for a
// second: a spell of quick beats is over.
func calm(t *testing.T, f *Forwarder) {
	t.Helper()
	last, since := f.beats.forced.Load(), time.Now()
	waitFor(t, 30*time.Second, "the spell of quick beats to end", func() bool {
		if n := f.beats.forced.Load(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) > time.Second
	})
}
