package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
)

// retentionCheckInterval is how often the embedded broker deletes expired
// records: its log.retention.check.interval.ms. Kafka's default is 5
// minutes; a pass here is a handful of requests to a broker in the same
// process, so once a minute costs nothing and keeps what an expired record
// holds in memory to a minute of traffic.
const retentionCheckInterval = time.Minute

// retention applies retention.ms to every topic of the embedded broker, as
// Kafka does: it deletes the oldest records of a partition while every
// record up to them is older than the topic's retention.ms, and stops at
// the first that is not. A record with an old timestamp written after newer
// ones (a producer's clock, a replayed dead letter) waits for those before
// it: kfake's own retention (Cluster.ApplyRetention) would delete every
// record up to it instead, so it is turned off (see startBroker).
//
// Nothing pending is deleted, however long kdelay was stopped: in the
// ingress and the level topics, a record kdelay's consumer group has not
// committed past waits in the topic until it has (Kafka itself would
// delete it once it is older than retention.ms, which is why kdelay
// requires retention-headroom there). So the broker holds what is pending
// plus the records of the last retention.ms.
//
// retention.bytes is not applied: kdelay sets none, and the broker's
// default (log.retention.bytes) is -1, no limit.
type retention struct {
	adm    *kadm.Client
	topics kdelay.Topics
	group  string // kdelay's group setting, of which its consumer groups are named

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

// runOnce deletes the records that expired, and returns how many. A
// partition whose offsets cannot be listed is left for the next pass.
func (r *retention) runOnce(ctx context.Context) (deleted int64, err error) {
	cuts, err := r.expired(ctx)
	r.hold(ctx, cuts)
	deleted, derr := r.deleteBefore(ctx, cuts)
	return deleted, errors.Join(err, derr)
}

// expired is, for each partition of a topic with a retention.ms, the first
// record retention keeps.
func (r *retention) expired(ctx context.Context) (kadm.Offsets, error) {
	limits, err := r.limits(ctx)
	errs := []error{err}
	all := kadm.Offsets{}
	for retentionMs, topics := range limits {
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

// limits groups the topics whose cleanup.policy deletes by their
// retention.ms; a topic that keeps its records forever (-1) or only
// compacts is left out, as Kafka leaves it.
func (r *retention) limits(ctx context.Context) (map[int64][]string, error) {
	listed, err := r.adm.ListTopics(ctx)
	if err != nil || len(listed) == 0 {
		return nil, err
	}
	rcs, err := r.adm.DescribeTopicConfigs(ctx, listed.Names()...)
	if err != nil {
		return nil, fmt.Errorf("describe topic configs: %w", err)
	}
	limits := map[int64][]string{}
	var errs []error
	for _, rc := range rcs {
		if rc.Err != nil {
			errs = append(errs, fmt.Errorf("describe configs of %s: %w", rc.Name, rc.Err))
			continue
		}
		ms, err := strconv.ParseInt(effective(rc, "retention.ms", "log.retention.ms"), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("retention.ms of %s: %w", rc.Name, err))
			continue
		}
		if ms >= 0 && strings.Contains(effective(rc, "cleanup.policy", "log.cleanup.policy"), "delete") {
			limits[ms] = append(limits[ms], rc.Name)
		}
	}
	return limits, errors.Join(errs...)
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

// hold lowers each cut in the ingress and the level topics to the offset
// kdelay's consumer group of that topic has committed: what lies past it
// is pending. A partition with no commit, or whose commit cannot be read,
// keeps all its records: kdelay reads a new group's partitions from the
// start.
func (r *retention) hold(ctx context.Context, cuts kadm.Offsets) {
	groups := map[string]string{} // topic → the group kdelay reads it with
	var names []string
	for topic := range cuts {
		if g := r.groupOf(topic); g != "" {
			groups[topic] = g
			names = append(names, g)
		}
	}
	if len(names) == 0 {
		return
	}
	fetched := r.adm.FetchManyOffsets(ctx, names...)
	for topic, g := range groups {
		for p, cut := range cuts[topic] {
			c, ok := fetched[g].Fetched.Lookup(topic, p)
			switch {
			case fetched[g].Err != nil || !ok || c.Err != nil || c.At < 0:
				cuts.Delete(topic, p)
			case c.At < cut.At:
				cut.At = c.At // not Add, which only raises
				cuts[topic][p] = cut
			}
		}
	}
}

// groupOf is the consumer group kdelay reads topic with, "" for a topic
// it does not consume: the ingress, or a level, configured or dropped
// (dropped ones are drained with their group).
func (r *retention) groupOf(topic string) string {
	if topic == r.topics.Ingress() {
		return forwarder.IngressGroup(r.group)
	}
	if level, ok := strings.CutPrefix(topic, r.topics.Level("")); ok {
		return forwarder.LevelGroup(r.group, level)
	}
	return ""
}
