package forwarder

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ensureTopics creates kdelay's missing topics and refuses to go on when an
// existing level topic would expire records before they are due.
//
// Topics are created explicitly rather than left to auto-creation so they get
// kdelay's retention and timestamp type, and so an embedded broker persists
// them.
func ensureTopics(ctx context.Context, adm *kadm.Client, cfg *Config) error {
	existing, err := adm.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("list topics on %s: %w", strings.Join(cfg.Brokers, ","), err)
	}
	var missing []string
	had := map[string]bool{}
	for _, topic := range cfg.ownTopics() {
		had[topic] = existing.Has(topic)
		if !had[topic] {
			missing = append(missing, topic)
		}
	}
	raced, err := createTopics(ctx, adm, cfg, missing)
	if err != nil {
		return err
	}
	for _, topic := range raced {
		had[topic] = true
	}
	if err := awaitTopics(ctx, adm, missing); err != nil {
		return err
	}
	// Only topics that existed need checking: the ones just created have
	// kdelay's own configs.
	return checkRetention(ctx, adm, cfg, had)
}

// topicsServedTimeout bounds how long kdelay waits for topics it created to
// be served before it gives up starting.
const topicsServedTimeout = 30 * time.Second

// awaitTopics waits until the broker's metadata shows every topic with a
// leader for each partition. On Apache Kafka CreateTopics returns once the
// controller has the topic; a broker serves it a moment later, and a
// producer that writes in between is told UNKNOWN_TOPIC_OR_PARTITION. kdelay
// says it is ready only after this, so ready means records can be written.
func awaitTopics(ctx context.Context, adm *kadm.Client, topics []string) error {
	if len(topics) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, topicsServedTimeout,
		fmt.Errorf("not served within %s of being created: check the brokers' logs and that each topic has a leader", topicsServedTimeout))
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		md, err := adm.Metadata(ctx, topics...)
		if err == nil && served(md, topics) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the broker to serve topics %s: %w", strings.Join(topics, ", "), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// served reports whether every topic has partitions, each with a leader.
func served(md kadm.Metadata, topics []string) bool {
	for _, topic := range topics {
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) == 0 {
			return false
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// createTopics creates topics and returns those that turned out to exist
// already: a broker's metadata may lag a topic created a moment ago.
func createTopics(ctx context.Context, adm *kadm.Client, cfg *Config, topics []string) (existed []string, err error) {
	if len(topics) == 0 {
		return nil, nil
	}
	n := len(topics)
	retention := strconv.FormatInt(cfg.Retention.Milliseconds(), 10)
	configs := map[string]*string{
		"retention.ms":   &retention,
		"cleanup.policy": ptr("delete"),
		// The head's due time is its timestamp plus the level, and kdelay
		// sets that timestamp itself to the time it planned the hop.
		"message.timestamp.type": ptr("CreateTime"),
	}
	control := cfg.Topics.Control()
	topics = slices.DeleteFunc(slices.Clone(topics), func(t string) bool { return t == control })
	resps := kadm.CreateTopicResponses{}
	if len(topics) > 0 {
		if resps, err = adm.CreateTopics(ctx, cfg.Partitions, cfg.ReplicationFactor, configs, topics...); err != nil {
			return nil, fmt.Errorf("create topics %s: %w", strings.Join(topics, ", "), err)
		}
	}
	if len(topics) < n {
		// The last command per id is what counts (compact); a command
		// older than its ttl counts for nothing (delete), so the topic
		// holds what is live, not every command ever written.
		cresps, err := adm.CreateTopics(ctx, cfg.Partitions, cfg.ReplicationFactor, map[string]*string{
			"retention.ms":   &retention,
			"cleanup.policy": ptr("compact,delete"),
		}, control)
		if err != nil {
			return nil, fmt.Errorf("create topic %s: %w", control, err)
		}
		maps.Copy(resps, cresps)
	}
	var errs []error
	for _, r := range resps.Sorted() {
		switch {
		case errors.Is(r.Err, kerr.TopicAlreadyExists):
			// Another kdelay process starting at the same time won the race.
			existed = append(existed, r.Topic)
		case r.Err != nil:
			errs = append(errs, fmt.Errorf("create topic %s: %w (%s); create it yourself with %d partitions, or give kdelay CREATE on the cluster",
				r.Topic, r.Err, r.ErrMessage, cfg.Partitions))
		}
	}
	return existed, errors.Join(errs...)
}

// checkRetention refuses level topics whose retention.ms is shorter than
// their level plus RetentionHeadroom, and level topics that compact.
func checkRetention(ctx context.Context, adm *kadm.Client, cfg *Config, existing map[string]bool) error {
	var names []string
	for _, l := range cfg.Levels {
		if name := cfg.Topics.Level(l.Name); existing[name] {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	rcs, err := describeConfigs(ctx, adm, names)
	if err != nil {
		return fmt.Errorf("describe level topic configs: %w", err)
	}
	var errs []error
	for _, l := range cfg.Levels {
		topic := cfg.Topics.Level(l.Name)
		if !existing[topic] {
			continue
		}
		rc, err := rcs.On(topic, nil)
		if err == nil {
			err = rc.Err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("describe configs of %s: %w", topic, err))
			continue
		}
		errs = append(errs, checkLevelTopic(topic, l.Delay, cfg.RetentionHeadroom, rc.Configs))
	}
	return errors.Join(errs...)
}

// describeConfigs describes topics, asking again for up to ten seconds while
// the broker does not know one yet: metadata of a new topic takes a moment
// to reach every broker.
func describeConfigs(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ResourceConfigs, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
		unknown := err == nil && slices.ContainsFunc(rcs, func(rc kadm.ResourceConfig) bool {
			return errors.Is(rc.Err, kerr.UnknownTopicOrPartition)
		})
		if !unknown || time.Now().After(deadline) {
			return rcs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// maxMessageBytes is topic's max.message.bytes as the broker resolves it:
// the topic's own setting, or else the broker's message.max.bytes.
func maxMessageBytes(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	rcs, err := describeConfigs(ctx, adm, []string{topic})
	if err != nil {
		return 0, fmt.Errorf("describe configs of %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return 0, fmt.Errorf("describe configs of %s: %w", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			return strconv.Atoi(*c.Value)
		}
	}
	return 0, fmt.Errorf("the broker lists no max.message.bytes for %s", topic)
}

func checkLevelTopic(topic string, level, headroom time.Duration, configs []kadm.Config) error {
	need := level + headroom
	for _, c := range configs {
		if c.Value == nil {
			continue
		}
		switch c.Key {
		case "retention.ms":
			ms, err := strconv.ParseInt(*c.Value, 10, 64)
			if err != nil || ms < 0 {
				continue // -1: kept forever
			}
			if got := time.Duration(ms) * time.Millisecond; got < need {
				return fmt.Errorf("topic %s keeps records for retention.ms=%d (%s), less than its level plus %s of headroom (%s): records could expire before they are due; "+
					"fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics --entity-name %s --add-config retention.ms=%d",
					topic, ms, got, headroom, need, topic, (7 * 24 * time.Hour).Milliseconds())
			}
		case "cleanup.policy":
			if slices.Contains(strings.Split(*c.Value, ","), "compact") {
				return fmt.Errorf("topic %s has cleanup.policy=%s: compaction drops pending records; fix: kafka-configs.sh --bootstrap-server <brokers> --alter --entity-type topics --entity-name %s --add-config cleanup.policy=delete",
					topic, *c.Value, topic)
			}
		}
	}
	return nil
}

func ptr(s string) *string { return &s }
