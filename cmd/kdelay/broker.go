package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
)

// embeddedBroker is the single-node Kafka broker kdelay runs when no
// brokers are configured, with what keeps it bounded: its retention.
type embeddedBroker struct {
	cluster   *kfake.Cluster
	client    *kgo.Client // retention's
	retention retention
	unlock    func()
}

// segmentBytes is the embedded broker's log.segment.bytes. Retention deletes
// a segment file once every record in it has expired, and until then its
// expired records stay on disk and their index in memory (about 72 bytes a
// batch): at most one segment per partition. kfake's 100 MiB is more than
// the embedded broker's whole window at the rates it is meant for, so
// nothing would shrink. 1 MiB (about 5,000 batches of a small record) bounds
// that to 1 MiB of data-dir and 400 KB of heap per partition, at the cost of
// a pair of files per MiB of each partition's log and, once read, an open
// handle for each sealed segment.
const segmentBytes = 1 << 20

// noCleaner is the embedded broker's log.cleaner.backoff.ms: kfake's own
// cleaner never runs, since it applies retention its own way too (see
// retention). So the broker compacts nothing: kdelay.control
// (compact,delete) keeps every command for its retention.ms, a topic that
// only compacts keeps every record, and kdelay's scheduler compacts
// kdelay.schedules itself (schedule.Config.Compact).
const noCleaner = 100 * 365 * 24 * time.Hour

// startBroker starts the embedded single-node Kafka broker kdelay uses when
// no brokers are configured. It keeps its log in data-dir and reloads it on
// start, so records pending in kdelay's topics survive a restart; Close
// writes the rest of its state there. Run applies retention.
//
// Target topics are created on first use, as a development broker should
// (see createOnMetadata); kdelay creates its own topics itself. Both keep
// records for retention: it is the broker's log.retention.ms too.
//
// The data directory is locked for as long as the process lives (the lock
// goes with it, even on SIGKILL): two brokers writing one directory would
// corrupt it.
func startBroker(cfg config.Config, log *slog.Logger) (b *embeddedBroker, err error) {
	release, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	// kfake always asks for 127.0.0.1 and the port from kfake.Ports; listen
	// on the configured address instead. The broker advertises the address
	// it listens on.
	listen := func(network, _ string) (net.Listener, error) { return net.Listen(network, cfg.Listen) }
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.ListenFn(listen),
		kfake.DataDir(cfg.DataDir),
		// No kfake.AllowAutoTopicCreation: createOnMetadata does it, durably.
		kfake.DefaultNumPartitions(int(cfg.Partitions)),
		// Kafka's default range of session timeouts, 6s to 30m: kfake's
		// own maximum is 5m, and a setting that works here should work
		// on a cluster and the other way round.
		kfake.GroupMaxSessionTimeout(30*time.Minute),
		kfake.BrokerConfigs(map[string]string{
			"log.retention.ms":       strconv.FormatInt(cfg.Retention.Milliseconds(), 10),
			"log.segment.bytes":      strconv.Itoa(segmentBytes),
			"log.cleaner.backoff.ms": strconv.FormatInt(noCleaner.Milliseconds(), 10),
		}),
		kfake.WithLogger(brokerLog{log}),
	)
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return nil, fmt.Errorf("listen: %s is already in use, by another kdelay or a Kafka broker: pick a free address with --listen (e.g. --listen 127.0.0.1:9093), or use the broker there with --brokers %s",
			cfg.Listen, cfg.Listen)
	case err != nil:
		return nil, fmt.Errorf("start the embedded broker on %s with data in %s: %w", cfg.Listen, cfg.DataDir, err)
	}
	cluster.ControlKey(int16(kmsg.Metadata), createOnMetadata(cluster, log))
	client, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.WithLogger(kslog.New(log)),
		// Each retention pass lists the topics afresh: kgo would answer
		// from metadata up to 5s old, without a topic created since.
		kgo.MetadataMinAge(10*time.Millisecond))
	if err != nil {
		cluster.Close()
		return nil, fmt.Errorf("connect to the embedded broker: %w", err)
	}
	return &embeddedBroker{cluster: cluster, client: client, unlock: release, retention: retention{
		cl: client, adm: kadm.NewClient(client), topics: kdelay.Topics{Prefix: cfg.TopicPrefix}, group: cfg.Group,
		interval: retentionCheckInterval, now: time.Now, log: log,
	}}, nil
}

// Addrs are the addresses the broker listens on.
func (b *embeddedBroker) Addrs() []string { return b.cluster.ListenAddrs() }

// Run applies retention until ctx ends.
func (b *embeddedBroker) Run(ctx context.Context) error { return b.retention.Run(ctx) }

// Close stops the broker, which writes its state to data-dir, and unlocks
// data-dir. Run must have returned.
func (b *embeddedBroker) Close() {
	b.client.Close()
	b.cluster.Close()
	b.unlock()
}

// createOnMetadata creates the topics a metadata request asks to auto-create,
// before kfake answers it.
//
// Why not kfake.AllowAutoTopicCreation: kfake's DataDir writes records to
// disk as it acknowledges them, and the topic list (topics.json) whenever a
// topic is created by CreateTopics -- but a topic its metadata handler
// auto-creates only reaches topics.json on a clean Close. After kill -9 the
// topic is unknown on restart and its records, though on disk, are gone:
// the records a producer wrote with kcat, and those kdelay delivered to a
// new target.
//
// Creating the topic here with Cluster.CreateTopic, which runs CreateTopics'
// code and writes topics.json before it returns, means every topic exists on
// disk before any client can learn of it, so before the broker acknowledges
// any record for it: a producer must see the topic in a metadata response
// before it can produce to it, and kfake never creates one on produce. With
// kfake's own auto-creation off, no topic is created any other way.
//
// A control function runs outside kfake's request loop, which serves
// CreateTopic while waiting for it; returning false lets kfake answer the
// request as usual, now with the topic. The topic gets the cluster default,
// --partitions partitions, as kfake's auto-creation gave it.
func createOnMetadata(cluster *kfake.Cluster, log *slog.Logger) func(kmsg.Request) (kmsg.Response, error, bool) {
	return func(req kmsg.Request) (kmsg.Response, error, bool) {
		meta, ok := req.(*kmsg.MetadataRequest)
		if !ok || !meta.AllowAutoTopicCreation {
			return nil, nil, false
		}
		for _, t := range meta.Topics {
			if t.Topic == nil || t.TopicID != [16]byte{} { // by ID: it exists or it is unknown
				continue
			}
			err := cluster.CreateTopic(*t.Topic, 0, nil)
			switch {
			case err == nil:
				log.Info("created topic on first use", "topic", *t.Topic)
			case !errors.Is(err, kerr.TopicAlreadyExists):
				// kfake answers that the topic is unknown; the client retries.
				log.Warn("create topic on first use", "topic", *t.Topic, "err", err)
			}
		}
		return nil, nil, false
	}
}

// lockDataDir takes an exclusive lock on dir/kdelay.lock, creating dir.
func lockDataDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data-dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "kdelay.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data-dir: %s is in use by another kdelay serve: stop it, or give this one its own --data-dir", dir)
		}
		return nil, fmt.Errorf("data-dir: lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
