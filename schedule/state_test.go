package schedule

import (
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// TestProgressMovesNext: a progress record that moves what a schedule wrote
// sets when it next writes: from its kdelay-progress-next when its writer
// knew the version in force, and otherwise by reading the schedule back
// (the slot's next unknown until a step does). A progress read again, or
// an older one, changes nothing.
func TestProgressMovesNext(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
	written := start.Add(time.Hour)
	next := written.Add(time.Hour)
	progressAt := func(version int64, next *time.Time) *kgo.Record {
		r := progressRecord("", 0, "hourly", progress{written: written, version: version, count: 1})
		if next != nil {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: headerNext, Value: []byte(next.Format(time.RFC3339))})
		}
		r.Offset = 1
		return r
	}
	for _, c := range []struct {
		name        string
		progress    *kgo.Record
		wantNext    time.Time
		wantUnknown bool
	}{
		{"with kdelay-progress-next of the version in force", progressAt(0, &next), next, false},
		{"written before kdelay-progress-next: read back", progressAt(0, nil), start.Add(time.Hour), true},
		{"of another version: read back", progressAt(-1, &next), start.Add(time.Hour), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, p := loadedState(t)
			rules := kdelay.Rules{MaxDelay: kdelay.DefaultMaxDelay}
			r, _, err := Record(rules, "hourly", kdelay.ScheduleFields{Spec: "@hourly", Target: "t"}, []byte("v"), nil, start)
			if err != nil {
				t.Fatal(err)
			}
			s.apply(r, start)
			i, _ := p.x.find(p.x.key([]byte("hourly")))
			if got := fromSeconds(p.x.slot(i).next); !got.Equal(start.Add(time.Hour)) {
				t.Fatalf("next %s after the schedule alone, want %s", got, start.Add(time.Hour))
			}
			s.apply(c.progress, start)
			sl := p.x.slot(i)
			if got := fromSeconds(sl.next); !got.Equal(c.wantNext) || sl.flags&slotNextUnknown != 0 != c.wantUnknown || p.unknown != btoi(c.wantUnknown) {
				t.Errorf("next %s, unknown %v (%d in the partition); want %s, %v", got, sl.flags&slotNextUnknown != 0, p.unknown, c.wantNext, c.wantUnknown)
			}
			if !s.wake().Equal(time.Unix(0, 0)) == c.wantUnknown {
				t.Errorf("wake %s with next unknown %v: want now exactly when unknown", s.wake(), c.wantUnknown)
			}
			before := *sl
			again := *c.progress
			again.Offset = 2
			s.apply(&again, start)
			if *p.x.slot(i) != before {
				t.Errorf("the same progress read again changed the slot: %+v, was %+v", *p.x.slot(i), before)
			}
		})
	}
}

// loadedState is a state with partition 0 assigned and loaded (empty).
func loadedState(t *testing.T) (*state, *part) {
	cfg := Config{Topics: kdelay.Topics{}, MaxDelay: kdelay.DefaultMaxDelay, Logger: slog.New(slog.DiscardHandler)}
	s := newState(&cfg)
	s.assign([]int32{0})
	s.setEnd(0, 0, 0, time.Time{})
	if !s.parts[0].loaded {
		t.Fatal("an empty partition is not loaded once its end is known")
	}
	return s, s.parts[0]
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDueSkipsAPartitionGoneSincePlanned: a partition revoked or reloaded
// between a step's plan and its decision is not decided for (the group's
// callbacks may run while the step reads back), and nothing is written
// for it.
func TestDueSkipsAPartitionGoneSincePlanned(t *testing.T) {
	t.Parallel()
	s, p := loadedState(t)
	start := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)
	r, _, err := Record(kdelay.Rules{MaxDelay: kdelay.DefaultMaxDelay}, "hourly", kdelay.ScheduleFields{Spec: "@hourly", Target: "t"}, []byte("v"), nil, start)
	if err != nil {
		t.Fatal(err)
	}
	s.apply(r, start)
	now := start.Add(time.Hour)
	plans := s.plan(now, 10)
	if len(plans) != 1 || plans[0].p != p || len(plans[0].due) != 1 {
		t.Fatalf("plans %+v, want partition 0 with the hourly schedule due", plans)
	}
	plans[0].read = map[int64]*kgo.Record{r.Offset: r}
	s.revoke([]int32{0})
	if b := s.due(now, 10, plans); len(b.records)+len(b.progress) != 0 || len(b.parts) != 0 {
		t.Errorf("decided %d records and %d progress for partitions %v revoked since planned, want nothing", len(b.records), len(b.progress), b.parts)
	}
}
