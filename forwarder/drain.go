package forwarder

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kdelay/kdelay/stages"
)

// A level dropped from Levels leaves its topic behind, and records may still
// wait in it: kdelay planned their hop into that level before the change.
// Nothing would read the topic any more, so they would wait forever. At
// start kdelay therefore drains every level topic of its prefix that is no
// longer configured but holds records its group has not committed: a worker
// forwards it like a configured level (each record released at its timestamp
// plus the level's delay, then re-planned from its due time into the
// configured levels) until the group has committed every record, then
// leaves. The topic is kept: deleting it is the user's call.
//
// Each kdelay process decides from Kafka's state, so the processes of one
// group agree: those that find records run a drainer in the level's group
// and share its partitions, and each stops once the group's committed
// offsets reach the end of every partition.

// drainCheckInterval is how often a drainer asks Kafka whether its level is
// empty: three small requests, and a drained level keeps its worker this
// long at most.
const drainCheckInterval = 5 * time.Second

// dropped is a level topic of this prefix that no configured level names.
type dropped struct {
	stage
	view    stages.Stage // as Kafka shows it, for counting its backlog
	backlog int64        // records its group has not committed
}

// findDropped returns the level topics no longer configured that still hold
// records to forward. It warns about topics of the level prefix whose name is
// not a level, and says which dropped levels are empty and can be deleted.
func findDropped(ctx context.Context, adm *kadm.Client, cfg *Config) ([]dropped, error) {
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	views, notLevels := cfg.view().Dropped(topics.Names())
	for _, n := range notLevels {
		cfg.Logger.Warn("level_topic_not_a_level", "topic", n.Topic, "err", n.Err)
	}
	if len(views) == 0 {
		return nil, nil
	}
	offs, err := stages.ReadOffsets(ctx, adm, views)
	if err != nil {
		return nil, err
	}
	var found []dropped
	for _, v := range views {
		d := dropped{stage: cfg.stage(v), view: v}
		if d.backlog, err = offs.Pending(v); err != nil {
			return nil, fmt.Errorf("records left in dropped level %s: %w", v.Topic, err)
		}
		if d.backlog == 0 {
			cfg.Logger.Info("dropped_level_empty", "topic", d.topic, "delete_with", deleteHint(cfg, d))
			continue
		}
		found = append(found, d)
	}
	return found, nil
}

// backlog counts the records of d its group has not committed. Any figure
// missing is an error: a level is drained only when Kafka says so.
func backlog(ctx context.Context, adm *kadm.Client, d dropped) (int64, error) {
	offs, err := stages.ReadOffsets(ctx, adm, []stages.Stage{d.view})
	if err != nil {
		return 0, err
	}
	return offs.Pending(d.view)
}

func (f *Forwarder) logDraining(d dropped) {
	f.cfg.Logger.Info("draining_dropped_level", "topic", d.topic, "records", d.backlog,
		"reason", fmt.Sprintf("level %s is no longer configured; its records are forwarded until it is empty", d.level))
}

// watchDrain asks Kafka every drainCheckInterval whether the dropped level's
// group has committed every record, and then stops its worker with stop.
// It returns nil when ctx ends first: shutdown is not an error.
func watchDrain(ctx context.Context, adm *kadm.Client, cfg *Config, d dropped, stop context.CancelFunc) error {
	defer stop()
	log := cfg.Logger.With("topic", d.topic)
	tick := time.NewTicker(drainCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		n, err := backlog(ctx, adm, d)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			log.Info("dropped_level_deleted")
			return nil
		case err != nil:
			log.Warn("drain_check_failed", "err", err)
		case n == 0:
			log.Info("dropped_level_drained", "delete_with", deleteHint(cfg, d))
			return nil
		}
	}
}

// deleteHint says how to delete a dropped level's topic, which kdelay leaves
// in place. Not its group: that is <group>, which reads every stage.
func deleteHint(cfg *Config, d dropped) string {
	return fmt.Sprintf("kafka-topics.sh --bootstrap-server %s --delete --topic %s", strings.Join(cfg.Brokers, ","), d.topic)
}

// deleteGroupHint is the command that deletes a consumer group kdelay no
// longer reads; Kafka refuses it while the group has members.
func deleteGroupHint(brokers []string, group string) string {
	return fmt.Sprintf("kafka-consumer-groups.sh --bootstrap-server %s --delete --group %s", strings.Join(brokers, ","), group)
}
