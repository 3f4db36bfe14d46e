package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// ensureTopic creates the schedules topic if it is missing, refuses one that
// does not compact, and returns its partition count.
//
// It compacts and never deletes by time: a schedule is kept until it is
// replaced or deleted, however long that is, and so is its progress.
func ensureTopic(ctx context.Context, adm *kadm.Client, cfg *Config) (int, error) {
	topic := cfg.Topics.Schedules()
	ctx, cancel := context.WithTimeoutCause(ctx, 30*time.Second,
		fmt.Errorf("%s not served within 30s: check the brokers' logs and that each partition has a leader", topic))
	defer cancel()
	configs := map[string]*string{"cleanup.policy": ptr("compact"), "min.compaction.lag.ms": ptr(minCompactionLag)}
	resp, err := adm.CreateTopic(ctx, cfg.Partitions, cfg.ReplicationFactor, configs, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		if err := checkCompacted(ctx, adm, topic, cfg.Logger); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, fmt.Errorf("create topic %s: %w; create it yourself, compacted: kafka-topics.sh --bootstrap-server <brokers> --create --topic %s --partitions %d --config cleanup.policy=compact --config min.compaction.lag.ms=%s",
			topic, err, topic, cfg.Partitions, minCompactionLag)
	}
	// A broker serves a topic a moment after it is created.
	for {
		md, err := adm.Metadata(ctx, topic)
		if td, ok := md.Topics[topic]; err == nil && ok && td.Err == nil && len(td.Partitions) > 0 && led(td.Partitions) {
			return len(td.Partitions), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("wait for topic %s: %w", topic, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ensureTopicRetrying is ensureTopic, tried again while the brokers cannot
// be reached or answer with an error worth retrying, until ctx ends: the
// scheduler starts once the forwarder is ready, and a broker outage then
// must not stop kdelay serve, as it does not stop the forwarder (until
// 2026-11-25 it did: TestOutageLogs). A refusal that only the operator can
// fix (authorization, a topic that does not compact) ends it.
func ensureTopicRetrying(ctx context.Context, adm *kadm.Client, cfg *Config) (int, error) {
	backoff := time.Second
	for {
		n, err := ensureTopic(ctx, adm, cfg)
		if err == nil || ctx.Err() != nil || !retriable(err) {
			return n, err
		}
		cfg.Logger.Warn("schedules_topic_unavailable", "topic", cfg.Topics.Schedules(), "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

// permanent is an error trying again does not fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retriable reports whether err may pass by itself: anything but a refusal
// of the operator's setup (permanent) or a Kafka error Kafka says is not
// worth retrying.
func retriable(err error) bool {
	var p permanent
	if errors.As(err, &p) {
		return false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Retriable
	}
	return true
}

func led(ps kadm.PartitionDetails) bool {
	for _, p := range ps {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// minCompactionLag keeps a replaced schedule record an hour after the
// record that replaced it: a scheduler reads the old one back to cancel its
// occurrences written and not yet due (handleChange), in the step after it
// reads the replace, and Kafka's cleaner does not remove a record younger
// than the lag. Without it the cleaner may remove it at once, and those
// occurrences, written Lookahead (a minute) ahead at most, are delivered.
const minCompactionLag = "3600000"

// checkCompacted refuses a schedules topic that deletes records by time:
// it would delete schedules that are still in force. It warns of one that
// may compact a replaced schedule away before its change is handled.
func checkCompacted(ctx context.Context, adm *kadm.Client, topic string, log *slog.Logger) error {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("describe configs of %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("describe configs of %s: %w", topic, err)
	}
	for _, c := range rc.Configs {
		switch {
		case c.Key == "cleanup.policy" && c.Value != nil && !slices.Equal(strings.Split(*c.Value, ","), []string{"compact"}):
			return permanent{fmt.Errorf("topic %s has cleanup.policy=%s: it must only compact, or schedules still in force are deleted; "+
				"fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact",
				topic, *c.Value, topic)}
		case c.Key == "min.compaction.lag.ms" && c.Value != nil && shortLag(*c.Value):
			log.Warn("schedules_compaction_lag_short", "topic", topic, "min.compaction.lag.ms", *c.Value,
				"err", fmt.Sprintf("Kafka may compact a replaced schedule away before kdelay cancels the occurrences it wrote ahead; "+
					"fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics --entity-name %s --add-config min.compaction.lag.ms=%s",
					topic, minCompactionLag))
		}
	}
	return nil
}

// shortLag reports whether a topic's min.compaction.lag.ms is under
// minCompactionLag.
func shortLag(v string) bool {
	lag, err := strconv.ParseInt(v, 10, 64)
	want, _ := strconv.ParseInt(minCompactionLag, 10, 64)
	return err == nil && lag < want
}

// Partitioner is the partitioner of a client that writes the scheduler's
// records (Config.Client): the scheduler's own records in the schedules
// topic, progress and load fences, whose keys start with NUL, go to their
// Record.Partition, the partition of the schedule they are about; every
// other record goes where Kafka's default partitioner (murmur2 of the key)
// puts it: an occurrence or a cancel where `kdelay send` or `kdelay cancel`
// would write it, a schedule where kdelay looks for it.
func Partitioner(topics kdelay.Topics) kgo.Partitioner { return newPartitioner(topics.Schedules()) }

type partitioner struct {
	schedules string
	byKey     kgo.Partitioner
}

func newPartitioner(schedules string) partitioner {
	return partitioner{schedules: schedules, byKey: kgo.StickyKeyPartitioner(nil)}
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.schedules {
		return ownPartition{manual: kgo.ManualPartitioner().ForTopic(topic), byKey: p.byKey.ForTopic(topic)}
	}
	return p.byKey.ForTopic(topic)
}

// ownPartition partitions the schedules topic (partitioner).
type ownPartition struct{ manual, byKey kgo.TopicPartitioner }

func (o ownPartition) RequiresConsistency(r *kgo.Record) bool {
	return o.pick(r).RequiresConsistency(r)
}

func (o ownPartition) Partition(r *kgo.Record, n int) int { return o.pick(r).Partition(r, n) }

func (o ownPartition) pick(r *kgo.Record) kgo.TopicPartitioner {
	if len(r.Key) > 0 && r.Key[0] == 0 {
		return o.manual
	}
	return o.byKey
}

// placeKey returns where Kafka's default partitioner puts a key in topic's n
// partitions: where a schedule record must be, so that every version of a
// schedule is in one partition.
func placeKey(topic string, n int) func([]byte) int32 {
	tp := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	return func(key []byte) int32 { return int32(tp.Partition(&kgo.Record{Key: key}, n)) }
}

func ptr(s string) *string { return &s }
