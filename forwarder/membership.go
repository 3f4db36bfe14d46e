package forwarder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
)

// How a forwarder takes part in its consumer group, and why.
//
// Protocol: the classic one (JoinGroup/SyncGroup) with the cooperative-sticky
// balancer, not KIP-848's server-side assignment (kgo.ServerSideBalancer),
// although Apache Kafka 4.x runs both. Measured on Apache Kafka 4.4, a static
// member that is SIGKILLed and restarted under KIP-848 is refused
// (UNRELEASED_INSTANCE_ID) until the dead member's session expires (still
// after 90s, with franz-go backing off between tries), because only a member
// that left with epoch -2 releases its instance id; and
// KIP-848's session timeout is the broker's group.consumer.session.timeout.ms
// (45s, with a minimum of 45s by default), not the client's. Under the classic
// protocol a restarted static member replaces the dead one at its JoinGroup
// and gets the same partitions back with no rebalance, and the session timeout
// is the client's own, down to 6s.
//
// Cooperative-sticky: a rebalance moves only the partitions that change
// owner, so a survivor keeps fetching and delivering its own partitions while
// the group waits, in the JoinGroup barrier, for a member that died to rejoin
// or to time out. What it cannot do during that barrier is commit (the client
// holds commits until the rebalance ends): commits are in the background
// (commit.go), so that wait delays nothing but the commit.
func groupOpts(cfg *Config, group string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.InstanceID(cfg.InstanceID),
		kgo.SessionTimeout(cfg.SessionTimeout),
		// A member learns that the group is rebalancing from a heartbeat:
		// beating more often than franz-go's every 3s, and quickly when a
		// rebalance may be coming (membership_beats.go), lets the
		// survivors rejoin, and the partitions of a departed member move,
		// sooner (heartbeatInterval).
		kgo.HeartbeatInterval(heartbeatInterval(cfg.SessionTimeout)),
		GroupRetryTimeout(cfg.SessionTimeout),
	}
}

// GroupRetryTimeout is the client option that sets how long the requests
// that keep a member in its group (and its commits) go on trying while the
// group's coordinator does not answer: 45s, franz-go's own default, which it
// ties to its default session timeout, or the session timeout if longer.
// The scheduler's group uses it too. kdelay's shorter SessionTimeout would otherwise cut it to 10s,
// less than a coordinator's failover takes when its broker dies (the
// controller fences the broker after broker.session.timeout.ms, 9s by
// default, then the group loads on another broker). Giving up ends the
// member's session: franz-go takes every partition as lost and the member
// joins again as a new one, and whichever member a partition lands on reads
// it again from the last commit, which the dead coordinator had refused
// since. Measured on a 3-node cluster, SIGKILL of the coordinator under
// 200 records/s (issue 20): 545 to 1,065 ids of 4,000 delivered twice at
// 10s, 28 at 45s. The new coordinator times sessions from when it loads the
// group, so a member that reaches it keeps its partitions. What it costs: a
// process cut off from a coordinator that is alive holds on for 45s instead
// of 10s, while the group gives its partitions to others after
// SessionTimeout; such a process cannot reach the cluster either, as a rule,
// and exactly-once fences its transactions by the group's generation.
func GroupRetryTimeout(session time.Duration) kgo.Opt {
	return kgo.RetryTimeoutFn(func(key int16) time.Duration {
		switch kmsg.Key(key) {
		case kmsg.Heartbeat, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.OffsetCommit, kmsg.TxnOffsetCommit:
			return groupRetry(session)
		}
		return 30 * time.Second // franz-go's default for the rest
	})
}

// groupRetry is how long GroupRetryTimeout's requests go on trying.
func groupRetry(session time.Duration) time.Duration {
	return max(session, 45*time.Second)
}

// heartbeatInterval is how often a member beats while its group is settled:
// a tenth of the session timeout, 1s by default, at most franz-go's default
// of 3s. A rebalance waits for every member to learn of it at its next beat,
// so while one may be coming a member beats every quickBeat instead
// (membership_beats.go): at a tenth alone, during a rolling deploy of 3
// processes, records came up to 1.4s late while the floor's max was 0.14s
// (docs/RELIABILITY.md, "A rolling deploy"), and at a fortieth the beats were
// nine tenths of an idle process's CPU.
func heartbeatInterval(session time.Duration) time.Duration {
	return min(session/10, 3*time.Second)
}

// DefaultInstanceID is the instance id of a process whose Config has none:
// the host name, stable across restarts under systemd and in a Kubernetes
// pod (StatefulSet pods keep theirs across rescheduling too). It is "" if the
// host has no name.
func DefaultInstanceID() string {
	name, err := os.Hostname()
	if err != nil {
		return ""
	}
	return name
}

// ErrInstanceIDTaken is what a Forwarder, or a schedule.Scheduler, stops
// with when another process joined its group with the same InstanceID, or
// holds it in a transaction: two processes with one id take the partitions
// from each other in turn, so one of them must go.
var ErrInstanceIDTaken = errors.New("give each kdelay process that shares the group its own InstanceID")

// fenced is the error a worker stops with when another process joined its
// group with the same instance id.
func (w *worker) fenced(err error) error {
	return fmt.Errorf("consumer group %s: another kdelay joined with InstanceID %q and fenced this one (%w); %w",
		w.group, w.cfg.InstanceID, err, ErrInstanceIDTaken)
}

// sessionRefused is the error of a member whose every join the group
// refuses for its session timeout: franz-go would try again for as long as
// it runs, alive and forwarding nothing. The range is the brokers' setting,
// so a config check could not know it; the embedded broker's is Kafka's
// default.
func (w *worker) sessionRefused(err error) error {
	return fmt.Errorf("consumer group %s refuses session-timeout %s (%w); set session-timeout within the brokers' range, 6s to 30m by default",
		w.group, kdelay.DurationText(w.cfg.SessionTimeout), err)
}

// isFenced reports whether err says that another member took our instance
// id.
func isFenced(err error) bool { return errors.Is(err, kerr.FencedInstanceID) }

// leaveGroups removes this process's instance id from the groups it was a
// member of, after a clean stop. A static member does not leave its group when
// its client closes (that is what lets a restart resume at once), so without
// this a kdelay stopped for good, or scaled down, would hold its partitions
// for SessionTimeout. A restart after a clean stop rejoins as a new member
// and costs one cooperative rebalance, in which no one else stops. It
// reports whether it left a group, which starts that rebalance.
func (f *Forwarder) leaveGroups(adm *kadm.Client, groups []string) (left bool) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.ShutdownTimeout)
	defer cancel()
	for _, g := range groups {
		res, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(g).InstanceIDs(f.cfg.InstanceID).Reason("kdelay stopped"))
		if err == nil {
			err = res.Error()
		}
		left = left || err == nil
		// Not a member (UNKNOWN_MEMBER_ID) is what leaving wants.
		if err != nil && !errors.Is(err, kerr.UnknownMemberID) {
			f.cfg.Logger.Warn("leave_group_failed", "group", g, "instance_id", f.cfg.InstanceID, "err", err)
		}
	}
	return left
}
