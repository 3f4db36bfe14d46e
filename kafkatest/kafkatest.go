// Package kafkatest gives each test a Kafka cluster to talk to, like httptest
// gives one an HTTP server: an in-process kfake broker by default, or the real
// cluster named by KDELAY_TEST_BROKERS, so the same test runs on both tiers.
//
// Tests get their own topic prefix and group names, so many tests share one
// real cluster without seeing each other's records.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvBrokers names the environment variable that switches every test that
// needs a broker to a real cluster: a comma-separated list of host:port.
const EnvBrokers = "KDELAY_TEST_BROKERS"

// Cluster is the broker a test talks to.
type Cluster struct {
	Brokers []string
	Fake    *kfake.Cluster // nil on a real cluster
	t       testing.TB
	keep    bool // At: leave what the test created
}

// Real reports whether the test runs against a real cluster.
func (c *Cluster) Real() bool { return c.Fake == nil }

// New returns the cluster named by KDELAY_TEST_BROKERS, or starts a
// single-broker kfake cluster that is closed when the test ends. Like a
// production cluster set up for kdelay, it does not auto-create topics: tests
// create the topics they use. opts apply to kfake only.
func New(t testing.TB, opts ...kfake.Opt) *Cluster {
	t.Helper()
	if env := os.Getenv(EnvBrokers); env != "" {
		return &Cluster{Brokers: strings.Split(env, ","), t: t}
	}
	opts = append([]kfake.Opt{kfake.NumBrokers(1), kfake.DefaultNumPartitions(1)}, opts...)
	fake, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(fake.Close)
	return &Cluster{Brokers: fake.ListenAddrs(), Fake: fake, t: t}
}

// At returns the cluster at brokers, one the test did not start: a `kdelay
// serve` running its embedded broker, for instance. Like a real cluster it
// is not closed when the test ends; unlike one, it does not delete what the
// test created.
func At(t testing.TB, brokers []string) *Cluster { return &Cluster{Brokers: brokers, t: t, keep: true} }

// Client returns a client for the cluster, closed when the test ends.
func (c *Cluster) Client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, opts...)...)
	if err != nil {
		c.t.Fatalf("new client: %v", err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates a topic for the test with the given partitions and
// configs (nil for defaults). On a real cluster it is deleted when the test
// ends.
func (c *Cluster) CreateTopic(topic string, partitions int32, configs map[string]*string) {
	c.t.Helper()
	adm := kadm.NewClient(c.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatalf("create topic %s: %v", topic, err)
	}
	c.deleteOnCleanup(topic)
	// Apache Kafka answers CreateTopics before its metadata lists the
	// topic: a test that asks right after would be told it does not exist.
	for {
		md, err := adm.Metadata(ctx, topic)
		if td, ok := md.Topics[topic]; err == nil && ok && td.Err == nil && len(td.Partitions) == int(partitions) && led(td.Partitions) {
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("topic %s created but not served within 30s", topic)
		case <-time.After(20 * time.Millisecond): // a deadline-bounded poll
		}
	}
}

// deleteOnCleanup deletes the named topics when the test ends, on a real
// cluster (kfake is thrown away whole).
func (c *Cluster) deleteOnCleanup(topics ...string) {
	if !c.Real() || c.keep {
		return
	}
	c.t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	})
}

// DeleteOnCleanup deletes every topic whose name starts with prefix when the
// test ends, on a real cluster.
func (c *Cluster) DeleteOnCleanup(prefix string) {
	if !c.Real() || c.keep {
		return
	}
	c.t.Cleanup(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
		if err != nil {
			return
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		topics, err := adm.ListTopics(ctx)
		if err != nil {
			return
		}
		var mine []string
		for _, name := range topics.Names() {
			if strings.HasPrefix(name, prefix) {
				mine = append(mine, name)
			}
		}
		if len(mine) > 0 {
			_, _ = adm.DeleteTopics(ctx, mine...)
		}
	})
}

var unsafe = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// Name returns a name unique to this test run, for topics, prefixes and
// groups: "kt-<test name>-<random>".
func Name(t testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := strings.ToLower(unsafe.ReplaceAllString(t.Name(), "-"))
	if len(name) > 60 {
		name = name[:60]
	}
	return "kt-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(b)
}

// led reports whether every partition has a leader.
func led(ps kadm.PartitionDetails) bool {
	for _, p := range ps {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}
