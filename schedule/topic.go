package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
	configs := map[string]*string{"cleanup.policy": ptr("compact")}
	resp, err := adm.CreateTopic(ctx, cfg.Partitions, cfg.ReplicationFactor, configs, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		if err := checkCompacted(ctx, adm, topic); err != nil {
			return 0, err
		}
	case err != nil:
		return 0, fmt.Errorf("create topic %s: %w; create it yourself, compacted: kafka-topics.sh --bootstrap-server <brokers> --create --topic %s --partitions %d --config cleanup.policy=compact",
			topic, err, topic, cfg.Partitions)
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

func led(ps kadm.PartitionDetails) bool {
	for _, p := range ps {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// checkCompacted refuses a schedules topic that deletes records by time:
// it would delete schedules that are still in force.
func checkCompacted(ctx context.Context, adm *kadm.Client, topic string) error {
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
		if c.Key == "cleanup.policy" && c.Value != nil && !slices.Equal(strings.Split(*c.Value, ","), []string{"compact"}) {
			return fmt.Errorf("topic %s has cleanup.policy=%s: it must only compact, or schedules still in force are deleted; "+
				"fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact",
				topic, *c.Value, topic)
		}
	}
	return nil
}

// partitioner puts the progress of a schedule in the partition of the
// schedule (Record.Partition), and every other record where Kafka's default
// partitioner (murmur2 of the key) puts it, so that a cancel lands where
// `kdelay cancel` would write it.
type partitioner struct {
	schedules string
	manual    kgo.Partitioner
	byKey     kgo.Partitioner
}

func newPartitioner(schedules string) partitioner {
	return partitioner{schedules: schedules, manual: kgo.ManualPartitioner(), byKey: kgo.StickyKeyPartitioner(nil)}
}

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.schedules {
		return p.manual.ForTopic(topic)
	}
	return p.byKey.ForTopic(topic)
}

// placeKey returns where Kafka's default partitioner puts a key in topic's n
// partitions: where a schedule record must be, so that every version of a
// schedule is in one partition.
func placeKey(topic string, n int) func([]byte) int32 {
	tp := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	return func(key []byte) int32 { return int32(tp.Partition(&kgo.Record{Key: key}, n)) }
}

func ptr(s string) *string { return &s }
