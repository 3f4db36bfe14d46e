package forwarder

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A member of a classic consumer group learns that its group rebalances only
// from the answer to a heartbeat, so the heartbeat interval bounds how long
// the partitions of a process that stopped wait for their new owner: every
// step of a rolling restart costs the records due meanwhile up to that much.
// Beating every 250ms kept a roll's records within 1s of due, and was nine
// tenths of an idle process's CPU (docs/BENCHMARKS.md, "Heartbeats are most
// of it"). So a process beats seldom (heartbeatInterval) except when its
// group may be rebalancing, which it hears of on the control topic, which
// every process reads: a process writes a notice there once its group
// client is joining and once it left its group (notify). On another's
// notice, and on each rebalance of its own (a cooperative rebalance takes two
// rounds, and the second begins when a member rejoins after the first), it
// beats every quickBeat for quickFor. A process that dies writes no notice:
// its partitions wait for its session to time out, which is far longer.

const (
	// quickBeat is how often a process beats while its group may be
	// rebalancing.
	quickBeat = 100 * time.Millisecond
	// quickFor is how long it beats quickly after a notice or a rebalance
	// of its own. Each round of a rebalance starts the spell again, so it
	// needs to outlast only the wait for the round that follows: a joiner's
	// first JoinGroup after its notice, a rejoin after a revoke.
	quickFor = 3 * time.Second
)

// noticeKey starts the key of a membership notice on the control topic,
// followed by the writer's instance id. Two NUL bytes: a command's key
// never starts with NUL (kdelay.ParseCommand refuses it), so no mark (NUL and
// a command's key) can share a notice's key and be compacted away by it.
const noticeKey = "\x00\x00member/"

// Notices are "joined" and "left", as the record's value.
const (
	noticeJoined = "joined"
	noticeLeft   = "left"
)

// quickBeats makes the group's client beat every quickBeat for quickFor
// after each call to quicken. One goroutine (run) for the process's life,
// parked while it is not beating quickly.
type quickBeats struct {
	cl     atomic.Pointer[kgo.Client] // the group's client; nil until it is made
	wake   chan struct{}
	forced atomic.Int64 // heartbeats sent ahead of their interval
}

func newQuickBeats() *quickBeats { return &quickBeats{wake: make(chan struct{}, 1)} }

// use makes cl the client that beats: the group's, which exactly-once
// replaces when its producer session renews.
func (q *quickBeats) use(cl *kgo.Client) { q.cl.Store(cl) }

// quicken starts, or extends, a spell of quick beats. A nil q does nothing:
// a test's worker alone in its group.
func (q *quickBeats) quicken() {
	if q == nil {
		return
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run beats quickly for quickFor after each quicken, until ctx ends.
func (q *quickBeats) run(ctx context.Context) error {
	ticker := time.NewTicker(quickBeat)
	ticker.Stop()
	defer ticker.Stop()
	var until time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-q.wake:
			until = time.Now().Add(quickFor)
			ticker.Reset(quickBeat)
		case <-ticker.C:
			if time.Now().After(until) {
				ticker.Stop()
				continue
			}
		}
		// Not taken while the member joins (no session) or beats already:
		// the next tick tries again.
		if cl := q.cl.Load(); cl != nil && cl.HeartbeatNow() {
			q.forced.Add(1)
		}
	}
}

// noticeRecord is what a process writes to the control topic when it joined
// or left its group.
func noticeRecord(topic, instance, what string, now time.Time) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: []byte(noticeKey + instance), Value: []byte(what), Timestamp: now}
}

// parseNotice returns the instance id of a notice, and whether rec is one.
func parseNotice(rec *kgo.Record) (instance string, ok bool) {
	return strings.CutPrefix(string(rec.Key), noticeKey)
}

// notify writes a notice with cl: the others then learn of the rebalance it
// starts or ends at once. Without it they learn at their next heartbeat, so
// it waits a few seconds at most, until ctx ends at the latest, and a failure
// is logged and nothing more. Not ProduceSync: a record already sent waits
// for its answer whatever its context, and with its partition's leader
// unreachable a stop waited for minutes.
func (f *Forwarder) notify(ctx context.Context, cl *kgo.Client, what string) {
	ctx, cancel := context.WithTimeout(ctx, min(f.cfg.ShutdownTimeout, 5*time.Second))
	defer cancel()
	rec := noticeRecord(f.cfg.Topics.Control(), f.cfg.InstanceID, what, f.cfg.NowFunc())
	done := make(chan error, 1)
	cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	if err != nil {
		f.cfg.Logger.Warn("membership_notice_failed", "notice", what, "topic", rec.Topic, "err", err,
			"reason", "the other processes learn of this rebalance at their next heartbeat instead")
	}
}

// heard is the control reader's part: a notice another process wrote within
// quickFor starts a spell of quick beats. An older one was written before
// this process read it (at start, the whole topic is read) and tells of a
// rebalance long over.
func (q *quickBeats) heard(instance, self string, at, now time.Time) {
	if instance != self && now.Sub(at) < quickFor {
		q.quicken()
	}
}
