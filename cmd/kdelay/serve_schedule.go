package main

import (
	"cmp"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/schedule"
)

// scheduler is the Scheduler serve runs beside the forwarder: it writes the
// occurrences of recurring schedules into the ingress, in the same delivery
// (at-least-once or exactly-once) and group as the forwarder. plain is
// the client the process uses outside its group (forward): the scheduler's
// admin requests, load fences and at-least-once writes go on it.
func (s server) scheduler(brokers []string, plain *kgo.Client) (*schedule.Scheduler, error) {
	cfg := s.schedulerConfig(brokers)
	cfg.Client = plain
	return schedule.New(cfg)
}

// schedulerConfig is the scheduler's configuration from serve's.
func (s server) schedulerConfig(brokers []string) schedule.Config {
	cfg := s.cfg
	return schedule.Config{
		Brokers:     brokers,
		Topics:      kdelay.Topics{Prefix: cfg.TopicPrefix},
		Group:       cfg.Group,
		ExactlyOnce: forwarder.Delivery(cfg.Delivery) == forwarder.ExactlyOnce,
		// On the forwarders' client and in their group: a deployment is one
		// group, and a process one member and one transactional producer.
		AsReader: true,
		// As the forwarder defaults it: serve sets it before it gets here,
		// a test running forward on its own may not.
		InstanceID:            cmp.Or(cfg.InstanceID, forwarder.DefaultInstanceID()),
		TransactionalIDSuffix: s.txnIDSuffix,
		// An occurrence is a delay of Lookahead: a max-delay below the
		// default lowers it (config refuses a value set above).
		Lookahead:         min(cfg.ScheduleLookahead, cfg.MaxDelay),
		MaxDelay:          cfg.MaxDelay,
		SessionTimeout:    cfg.SessionTimeout,
		ShutdownTimeout:   cfg.ShutdownTimeout,
		Partitions:        cfg.Partitions,
		ReplicationFactor: cfg.ReplicationFactor,
		// The embedded broker runs without kfake's cleaner (broker.go): the
		// scheduler compacts the schedules topic itself.
		Compact:    cfg.Embedded(),
		ClientOpts: append(cfg.ClientOpts(), kgo.WithLogger(kslog.New(s.kafkaLog))),
		Logger:     s.log,
	}
}
