package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
)

// retentionCheckInterval is how often the embedded broker deletes expired
// records: its log.retention.check.interval.ms. Kafka's default is 5
// minutes; a pass here is a handful of requests to a broker in the same
// process, so once a minute costs nothing and keeps what an expired record
// holds in memory to a minute of traffic.
const retentionCheckInterval = time.Minute

// retention applies retention.ms and retention.bytes to every topic of the
// embedded broker, as Kafka does. By time, it deletes the oldest records of
// a partition while every record up to them is older than the topic's
// retention.ms, and stops at the first that is not. A record with an old
// timestamp written after newer ones (a producer's clock, a replayed dead
// letter) waits for those before it: kfake's own retention
// (Cluster.ApplyRetention) would delete every record up to it instead, so
// it is turned off (see startBroker).
//
// Nothing pending is deleted, however long kdelay was stopped: in the
// ingress and the level topics, a record kdelay's consumer group has not
// committed past waits in the topic until it has (Kafka itself would
// delete it once it is older than retention.ms, which is why kdelay
// requires retention-headroom there). So the broker holds what is pending
// plus the records of the last retention.ms.
//
// By size, it deletes the oldest batches of a partition beyond the topic's
// retention.bytes (see oversized), with the same hold. kdelay sets none, and
// the broker's default (log.retention.bytes) is -1, no limit.
type retention struct {
	cl     *kgo.Client // for the fetches of oversized
	adm    *kadm.Client
	topics kdelay.Topics
	group  string // kdelay's consumer group, which reads every topic of kdelay's in either delivery

	// interval is the time between passes: retentionCheckInterval, shorter
	// in tests.
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger
}

// Run applies retention at once, for what expired while the broker was
// down, then every interval, until ctx ends. A pass that fails is logged
// and tried again at the next.
func (r *retention) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		deleted, err := r.runOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("retention_failed", "err", err)
		case deleted > 0:
			r.log.Info("retention_applied", "records", deleted)
		}
		timer.Reset(r.interval)
	}
}

// runOnce deletes the records that expired or are beyond retention.bytes,
// and returns how many. A partition whose offsets cannot be listed is left
// for the next pass.
func (r *retention) runOnce(ctx context.Context) (deleted int64, err error) {
	policies, err := r.policies(ctx)
	held := r.commits(ctx, slices.Collect(maps.Keys(policies)))
	cuts, terr := r.expired(ctx, policies)
	over, berr := r.oversized(ctx, policies, held)
	over.Each(cuts.Add) // the cut of the rule that deletes more
	held.hold(cuts)
	deleted, derr := r.deleteBefore(ctx, cuts)
	return deleted, errors.Join(err, terr, berr, derr)
}

// expired is, for each partition of a topic with a retention.ms, the first
// record retention.ms keeps.
func (r *retention) expired(ctx context.Context, policies map[string]policy) (kadm.Offsets, error) {
	byMs := map[int64][]string{} // one ListOffsets by time per retention.ms
	for topic, p := range policies {
		if p.ms >= 0 {
			byMs[p.ms] = append(byMs[p.ms], topic)
		}
	}
	var errs []error
	all := kadm.Offsets{}
	for retentionMs, topics := range byMs {
		cuts, err := r.cuts(ctx, r.now().UnixMilli()-retentionMs, topics)
		errs = append(errs, err)
		cuts.Each(all.Add)
	}
	return all, errors.Join(errs...)
}

// deleteBefore deletes the records before cuts that are still there, and
// returns how many.
func (r *retention) deleteBefore(ctx context.Context, cuts kadm.Offsets) (deleted int64, err error) {
	if len(cuts) == 0 {
		return 0, nil
	}
	starts, err := r.adm.ListStartOffsets(ctx, cuts.TopicsSet().Topics()...)
	if err != nil {
		return 0, fmt.Errorf("list start offsets: %w", err)
	}
	cuts.KeepFunc(func(o kadm.Offset) bool {
		s, ok := starts.Lookup(o.Topic, o.Partition)
		if !ok || s.Err != nil || o.At <= s.Offset {
			return false
		}
		deleted += o.At - s.Offset
		return true
	})
	if len(cuts) == 0 {
		return 0, nil
	}
	resps, err := r.adm.DeleteRecords(ctx, cuts)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("delete expired records: %w", err)
	}
	return deleted, nil
}

// policy is a topic's retention.ms and retention.bytes; -1 is no limit.
type policy struct{ ms, bytes int64 }

// policies are the limits of each topic whose cleanup.policy deletes; a
// topic that keeps its records forever (both -1) or only compacts is left
// out, as Kafka leaves it.
func (r *retention) policies(ctx context.Context) (map[string]policy, error) {
	listed, err := r.adm.ListTopics(ctx)
	if err != nil || len(listed) == 0 {
		return nil, err
	}
	rcs, err := r.adm.DescribeTopicConfigs(ctx, listed.Names()...)
	if err != nil {
		return nil, fmt.Errorf("describe topic configs: %w", err)
	}
	policies := map[string]policy{}
	var errs []error
	for _, rc := range rcs {
		p, err := policyOf(rc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if (p.ms >= 0 || p.bytes >= 0) && strings.Contains(effective(rc, "cleanup.policy", "log.cleanup.policy"), "delete") {
			policies[rc.Name] = p
		}
	}
	return policies, errors.Join(errs...)
}

// policyOf reads a topic's limits from its described configs.
func policyOf(rc kadm.ResourceConfig) (policy, error) {
	if rc.Err != nil {
		return policy{}, fmt.Errorf("describe configs of %s: %w", rc.Name, rc.Err)
	}
	ms, err := strconv.ParseInt(effective(rc, "retention.ms", "log.retention.ms"), 10, 64)
	if err != nil {
		return policy{}, fmt.Errorf("retention.ms of %s: %w", rc.Name, err)
	}
	bytes, err := strconv.ParseInt(effective(rc, "retention.bytes", "log.retention.bytes"), 10, 64)
	if err != nil {
		return policy{}, fmt.Errorf("retention.bytes of %s: %w", rc.Name, err)
	}
	return policy{ms: ms, bytes: bytes}, nil
}

// effective is a topic's setting: its own, else the broker's default, else
// the built-in one. kfake lists all three, the broker's under its broker
// name; Kafka lists one, under the topic's name.
func effective(rc kadm.ResourceConfig, topicKey, brokerKey string) string {
	var builtIn, broker string
	for _, c := range rc.Configs {
		switch {
		case c.Key == topicKey && c.Source == kmsg.ConfigSourceDynamicTopicConfig:
			return c.MaybeValue()
		case c.Key == brokerKey:
			broker = c.MaybeValue()
		case c.Key == topicKey:
			builtIn = c.MaybeValue()
		}
	}
	if broker != "" {
		return broker
	}
	return builtIn
}

// cuts is, for each partition of topics, the first record not to delete:
// the first whose timestamp, or that of a record before it, is at or after
// cutoff (unix milliseconds).
//
// ListOffsets by time answers exactly that, since the broker searches the
// running maximum of timestamps. When no record qualifies, kadm lists the
// end offset in a second request, which may count records written in
// between: the end offsets listed before are the cut then, so a record
// written during a pass is never deleted by it.
func (r *retention) cuts(ctx context.Context, cutoff int64, topics []string) (kadm.Offsets, error) {
	ends, err := r.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	after, err := r.adm.ListOffsetsAfterMilli(ctx, cutoff, topics...)
	if err != nil {
		return nil, fmt.Errorf("list offsets after %d: %w", cutoff, err)
	}
	cuts := kadm.Offsets{}
	after.Each(func(o kadm.ListedOffset) {
		end, ok := ends.Lookup(o.Topic, o.Partition)
		if o.Err == nil && o.Offset >= 0 && ok && end.Err == nil {
			cuts.AddOffset(o.Topic, o.Partition, min(o.Offset, end.Offset), -1)
		}
	})
	return cuts, nil
}

// commits are the offsets kdelay's consumer groups committed on the
// ingress and the level topics: what lies past them is pending.
type commits struct {
	groups  map[string]string // topic → the group kdelay reads it with
	fetched kadm.FetchOffsetsResponses
}

// commits fetches what kdelay's groups committed on those of topics it
// reads. They are fetched before any cut is made: a commit only moves on,
// so one read earlier holds at least as much.
func (r *retention) commits(ctx context.Context, topics []string) commits {
	c := commits{groups: map[string]string{}}
	var names []string
	for _, topic := range topics {
		if g := r.groupOf(topic); g != "" {
			c.groups[topic] = g
			names = append(names, g)
		}
	}
	c.fetched = r.adm.FetchManyOffsets(ctx, names...)
	return c
}

// bound is the offset before which retention may delete in partition p of
// topic, and whether topic is one kdelay reads. A partition with no commit,
// or whose commit cannot be read, has 0, and keeps all its records: kdelay
// reads a new group's partitions from the start.
func (c commits) bound(topic string, p int32) (int64, bool) {
	g, ok := c.groups[topic]
	if !ok {
		return 0, false
	}
	o, ok := c.fetched[g].Fetched.Lookup(topic, p)
	if c.fetched[g].Err != nil || !ok || o.Err != nil || o.At < 0 {
		return 0, true
	}
	return o.At, true
}

// hold lowers each cut in the ingress and the level topics to the offset
// kdelay's consumer group of that topic has committed.
func (c commits) hold(cuts kadm.Offsets) {
	for topic, ps := range cuts {
		for p, cut := range ps {
			if b, ok := c.bound(topic, p); ok && b < cut.At {
				cut.At = b // not Add, which only raises
				ps[p] = cut
			}
		}
	}
}

// groupOf is the consumer group kdelay reads topic with, "" for a topic
// it does not consume: the ingress, or a level, configured or dropped. After
// an upgrade from the per-stage layout, the group holds offsets from the
// takeover on (forwarder, upgrade.go): until then they are absent, which
// holds more, never less.
func (r *retention) groupOf(topic string) string {
	if topic != r.topics.Ingress() && !strings.HasPrefix(topic, r.topics.Level("")) {
		return ""
	}
	return r.group
}
