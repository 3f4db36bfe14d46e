package stages_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
	"github.com/kdelay/kdelay/stages"
)

// partition is what one partition of a case's topic holds.
type partition struct {
	records   int   // written to it
	committed int64 // the group's committed offset; -1 for none
	deleted   int64 // records deleted from its start, as retention does
}

// TestPending counts the pending records of stages that differ by their
// partitions' offsets only, all read with one ReadOffsets as the callers do.
func TestPending(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	cases := []struct {
		name       string
		dropped    bool // the stage is a dropped level, found by Config.Dropped
		partitions []partition
		want       int64
	}{
		{"nothing committed counts every record from the start", false, []partition{{3, -1, 0}, {2, -1, 0}}, 5},
		{"committed at the end counts none", false, []partition{{3, 3, 0}, {2, 2, 0}}, 0},
		{"a commit counts the records after it", false, []partition{{3, 1, 0}, {2, -1, 0}}, 4},
		{"records deleted past the commit are not counted", false, []partition{{10, 2, 6}}, 4},
		{"records deleted with nothing committed are not counted", false, []partition{{10, -1, 6}}, 4},
		{"an empty topic counts none", false, []partition{{0, -1, 0}}, 0},
		{"a dropped level with no member and no commit counts what it holds", true, []partition{{2, -1, 0}, {1, -1, 0}}, 3},
	}
	ss := make([]stages.Stage, len(cases))
	for i, c := range cases {
		ss[i] = stages.Stage{Name: c.name, Topic: fmt.Sprintf("%s.%d", fx.name, i), Group: fmt.Sprintf("%s.g%d", fx.name, i)}
		if c.dropped {
			dropped, _ := fx.cfg.Dropped([]string{fx.cfg.Topics.Level("30s")})
			ss[i] = dropped[0]
		}
		fx.fill(t, ss[i], c.partitions)
	}

	offs, err := stages.ReadOffsets(fx.ctx, fx.adm, ss)
	if err != nil {
		t.Fatalf("ReadOffsets: %v", err)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := offs.Pending(ss[i])
			if err != nil || got != c.want {
				t.Errorf("Pending(%s) = %d, %v; want %d, nil", ss[i].Topic, got, err, c.want)
			}
		})
	}

	t.Run("a topic that does not exist is an error kerr knows", func(t *testing.T) {
		missing := stages.Stage{Name: "missing", Topic: fx.name + ".missing", Group: fx.name + ".gm"}
		offs, err := stages.ReadOffsets(fx.ctx, fx.adm, []stages.Stage{missing})
		if err != nil {
			t.Fatalf("ReadOffsets: %v", err)
		}
		if n, err := offs.Pending(missing); !errors.Is(err, kerr.UnknownTopicOrPartition) || n != 0 {
			t.Errorf("Pending of a missing topic = %d, %v; want 0 and UNKNOWN_TOPIC_OR_PARTITION", n, err)
		}
	})
}

// TestDropped picks the level topics of the prefix that no configured level
// names.
func TestDropped(t *testing.T) {
	t.Parallel()
	cfg := stages.Config{Topics: kdelay.Topics{Prefix: "p"}, Group: "g", Levels: mustParse(t, "1s", "1m")}
	want := []string{"30s p.level.30s g 30s", "2h p.level.2h g 2h0m0s"}
	dropped, not := cfg.Dropped([]string{"p.level.2h", "p.level.1s", "p.level.soon", "p.level.30s", "p.ingress", "q.level.5s", "other"})
	var got []string
	for _, s := range dropped {
		got = append(got, s.Name+" "+s.Topic+" "+s.Group+" "+s.Wait.String())
		if s.Configured {
			t.Errorf("dropped level %s is marked configured", s.Name)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("dropped = %q, want %q (shortest delay first, read with the one group)", got, want)
	}
	if len(not) != 1 || not[0].Topic != "p.level.soon" || not[0].Err == nil {
		t.Errorf("not levels = %+v, want p.level.soon with the reason", not)
	}
}

type fixture struct {
	ctx     context.Context
	cluster *kafkatest.Cluster
	cl      *kgo.Client
	adm     *kadm.Client
	name    string
	cfg     stages.Config
}

func setup(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cluster := kafkatest.New(t)
	cl := cluster.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	return &fixture{
		ctx: ctx, cluster: cluster, cl: cl, adm: kadm.NewClient(cl), name: name,
		cfg: stages.Config{Topics: kdelay.Topics{Prefix: name}, Group: name, Levels: mustParse(t, "1s")},
	}
}

// fill creates s's topic with ps, writes their records, deletes the first
// ones and commits for s's group.
func (fx *fixture) fill(t *testing.T, s stages.Stage, ps []partition) {
	t.Helper()
	fx.cluster.CreateTopic(s.Topic, int32(len(ps)), nil)
	var rs []*kgo.Record
	commits := kadm.Offsets{}
	deletes := kadm.Offsets{}
	for p, part := range ps {
		for range part.records {
			rs = append(rs, &kgo.Record{Topic: s.Topic, Partition: int32(p), Value: []byte("v")})
		}
		if part.committed >= 0 {
			commits.AddOffset(s.Topic, int32(p), part.committed, -1)
		}
		if part.deleted > 0 {
			deletes.AddOffset(s.Topic, int32(p), part.deleted, -1)
		}
	}
	if err := fx.cl.ProduceSync(fx.ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", s.Topic, err)
	}
	if len(deletes) > 0 {
		resp, err := fx.adm.DeleteRecords(fx.ctx, deletes)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("delete records of %s: %v", s.Topic, err)
		}
	}
	if len(commits) > 0 {
		resp, err := fx.adm.CommitOffsets(fx.ctx, s.Group, commits)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit for %s: %v", s.Group, err)
		}
	}
}

func mustParse(t *testing.T, names ...string) levels.Set {
	t.Helper()
	set, err := levels.Parse(names)
	if err != nil {
		t.Fatal(err)
	}
	return set
}
