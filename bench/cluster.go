package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
	"github.com/kdelay/kdelay/stages"
)

// cluster is the broker a run measures on, a client for it, and the name
// that prefixes every topic and group of the run.
type cluster struct {
	brokers    []string
	fake       *kfake.Cluster // nil on a real cluster
	opts       []kgo.Opt
	readOpts   []kgo.Opt   // of the consumers that read what the forwarder delivered
	cl         *kgo.Client // produces with ProducerLinger(0), as the forwarder does
	adm        *kadm.Client
	runPrefix  string
	partitions int32
	log        *slog.Logger
	// discard: the broker and its data go away with the run (a kdelay
	// serve's own embedded broker), so there are no topics to delete.
	discard bool
}

// openCluster connects to brokers, or starts an embedded kfake broker when
// there are none.
func openCluster(brokers []string, opts []kgo.Opt, partitions int32, log *slog.Logger) (*cluster, error) {
	// The benchmark's own clients (the ingress's producer, the floor's,
	// the readers) learn of a partition's new leader as a Java client
	// does, within a second, as kdelay's do: with franz-go's 5 s between
	// metadata loads, each of the three on a record's path added its own
	// 0-5 s to a failover's lateness, by chance, and the floor its own.
	opts = append(forwarder.FailoverOpts(), opts...)
	c := &cluster{brokers: brokers, opts: opts, runPrefix: newRunPrefix(), partitions: partitions, log: log}
	if len(brokers) == 0 {
		fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(partitions)))
		if err != nil {
			return nil, fmt.Errorf("start the embedded broker: %w", err)
		}
		c.fake, c.brokers = fake, fake.ListenAddrs()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.brokers...), kgo.ProducerLinger(0)}, opts...)...)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("connect to %s: %w", strings.Join(c.brokers, ","), err)
	}
	c.cl, c.adm = cl, kadm.NewClient(cl)
	return c, nil
}

// newRunPrefix is unique to a run: "kdelay-bench-<8 hex digits>".
func newRunPrefix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "kdelay-bench-" + hex.EncodeToString(b)
}

func (c *cluster) String() string {
	if c.fake != nil {
		return "embedded kfake (in the benchmark process)"
	}
	return strings.Join(c.brokers, ",")
}

// close deletes the run's topics from a real cluster and lets go of it.
func (c *cluster) close() {
	if c.cl != nil && c.fake == nil && !c.discard {
		c.deleteTopics()
	}
	if c.cl != nil {
		c.cl.Close()
	}
	if c.fake != nil {
		c.fake.Close()
	}
}

func (c *cluster) deleteTopics() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topics, err := c.adm.ListTopics(ctx)
	if err != nil {
		c.log.Warn("delete_topics_failed", "run", c.runPrefix, "err", err)
		return
	}
	var mine []string
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, c.runPrefix) {
			mine = append(mine, name)
		}
	}
	if _, err := c.adm.DeleteTopics(ctx, mine...); err != nil {
		c.log.Warn("delete_topics_failed", "run", c.runPrefix, "err", err)
	}
}

// createTopics creates topics with the run's partition count.
func (c *cluster) createTopics(ctx context.Context, topics ...string) error {
	resps, err := c.adm.CreateTopics(ctx, c.partitions, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create topics %s: %w", strings.Join(topics, ", "), err)
	}
	var errs []error
	for _, r := range resps.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			errs = append(errs, fmt.Errorf("create topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}

// collector starts consuming topic with the cluster's readOpts, and
// returns once it reads every partition; it runs until ctx ends.
func (c *cluster) collector(ctx context.Context, topic string) (*collector, error) {
	return c.collect(ctx, topic, false, c.readOpts...)
}

// collect is collector with a trace of every record's arrivals when traced,
// and extra options for its consumer (an isolation level).
func (c *cluster) collect(ctx context.Context, topic string, traced bool, extra ...kgo.Opt) (*collector, error) {
	coll, err := newCollector(c.brokers, append(slices.Clip(c.opts), extra...), topic, traced, c.log)
	if err != nil {
		return nil, err
	}
	go coll.consume(ctx)
	if err := c.ready(ctx, coll, topic); err != nil {
		return nil, err
	}
	return coll, nil
}

// ready writes a record to every partition of a topic just created and
// waits until coll read them all. On a real broker a new topic takes a
// moment to have a leader for every partition, and a consumer that asked
// too early learns of the rest only at its next metadata refresh, seconds
// later: that would be counted against whatever is measured first.
func (c *cluster) ready(ctx context.Context, coll *collector, topic string) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(c.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, c.opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	g := newLateness("ready")
	now := time.Now()
	for p := range c.partitions {
		r := targetRecord(topic, coll.expect(g), now)
		r.Partition = p
		cl.Produce(ctx, r, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("write to every partition of %s: %w", topic, err)
	}
	if err := coll.wait(ctx, time.Now().Add(30*time.Second)); err != nil {
		return err
	}
	if sent, delivered := coll.of(g); delivered < sent {
		return fmt.Errorf("read %d of the %d partitions of %s within 30s", delivered, sent, topic)
	}
	return nil
}

// waitReady returns once every consumer group of the forwarder is stable,
// with its partitions assigned: from then on a record due is a record
// forwarded, and the time the forwarder took to join its groups is not
// counted as lateness.
func (c *cluster) waitReady(ctx context.Context, in Instance, set levels.Set) error {
	groups := forwarderGroups(in.Group(), set)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if err := in.Err(); err != nil {
			return err
		}
		if c.stable(ctx, groups) {
			return nil
		}
		if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
			return fmt.Errorf("forwarder's groups %s… not stable within 2 minutes: %w", groups[0], err)
		}
	}
}

func (c *cluster) stable(ctx context.Context, groups []string) bool {
	described, err := c.adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return false
	}
	for _, name := range groups {
		g, ok := described[name]
		if !ok || g.Err != nil || g.State != "Stable" || len(g.Members) == 0 {
			return false
		}
	}
	return true
}

// forwarderGroups are the consumer groups of a forwarder with group and
// levels: group itself, in either delivery.
func forwarderGroups(group string, set levels.Set) []string {
	return stages.Groups(stages.Config{Group: group, Levels: set}.Configured())
}

// members returns the member ids of each group that is Stable; a group
// that is not is left out.
func (c *cluster) members(ctx context.Context, groups []string) (map[string][]string, error) {
	described, err := c.adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, name := range groups {
		g, ok := described[name]
		if !ok || g.Err != nil || g.State != "Stable" {
			continue
		}
		for _, m := range g.Members {
			out[name] = append(out[name], m.MemberID)
		}
	}
	return out, nil
}
