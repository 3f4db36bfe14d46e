package schedule

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestTopicCompactionLag: the schedules topic kdelay creates keeps a
// replaced schedule's record an hour (min.compaction.lag.ms), long enough
// for the scheduler to read it back and cancel what it wrote ahead; one
// found with a shorter lag is used, with a warning that says how to fix it.
func TestTopicCompactionLag(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	lag := func(topic string) string {
		rcs, err := adm.DescribeTopicConfigs(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rc.Configs {
			if c.Key == "min.compaction.lag.ms" && c.Value != nil {
				return *c.Value
			}
		}
		return ""
	}

	var logged bytes.Buffer
	cfg := Config{Brokers: cluster.Brokers, Topics: kdelay.Topics{Prefix: name + ".created"}, Partitions: 1,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))}
	cfg = cfg.WithDefaults()
	if _, err := ensureTopic(context.Background(), adm, &cfg); err != nil {
		t.Fatalf("ensureTopic: %v", err)
	}
	if got := lag(cfg.Topics.Schedules()); got != minCompactionLag {
		t.Errorf("created %s with min.compaction.lag.ms %q, want %s", cfg.Topics.Schedules(), got, minCompactionLag)
	}
	if logged.Len() > 0 {
		t.Errorf("logged %q for the topic it created", logged.String())
	}

	cfg.Topics = kdelay.Topics{Prefix: name + ".short"}
	cluster.CreateTopic(cfg.Topics.Schedules(), 1, map[string]*string{"cleanup.policy": ptr("compact"), "min.compaction.lag.ms": ptr("0")})
	if _, err := ensureTopic(context.Background(), adm, &cfg); err != nil {
		t.Fatalf("ensureTopic of a topic with a short lag: %v; want it used, with a warning", err)
	}
	fix := "--entity-name " + cfg.Topics.Schedules() + " --add-config min.compaction.lag.ms=" + minCompactionLag
	if !strings.Contains(logged.String(), "schedules_compaction_lag_short") || !strings.Contains(logged.String(), fix) {
		t.Errorf("logged %q; want schedules_compaction_lag_short with the fix %q", logged.String(), fix)
	}
}
