package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/schedule"
)

// TestSchedules reads the schedules of a fleet from Kafka: before serve
// made the topic, then with one schedule in force and one kdelay refuses.
func TestSchedules(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	topics := kdelay.Topics{Prefix: name}
	// One Fleet a read, as kdelay status makes one: a client's metadata
	// may say for seconds that a topic just made does not exist.
	fleet := func() *Fleet {
		f, err := New(Config{Brokers: cluster.Brokers, Topics: topics, Group: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		return f
	}
	ctx := context.Background()
	now := time.Now()

	t.Run("no topic yet: said, not failed", func(t *testing.T) {
		st := fleet().Schedules(ctx, now)
		if st.Schedules != 0 || st.State != "none" || !strings.Contains(st.Problem, "does not exist: kdelay serve creates it") {
			t.Errorf("Schedules = %+v, want none, group none, and that serve creates the topic", st)
		}
	})
	cluster.CreateTopic(topics.Schedules(), 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	good, _, err := schedule.Record(kdelay.Rules{Topics: topics}, "hourly", kdelay.ScheduleFields{Spec: "@every 1h", Target: "reports"}, []byte("v"), nil, now)
	if err != nil {
		t.Fatal(err)
	}
	refused := &kgo.Record{Topic: topics.Schedules(), Key: []byte("bad"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderSchedule, Value: []byte("@every 1h")}}} // no target
	cl := cluster.Client()
	if err := cl.ProduceSync(ctx, good, refused).FirstErr(); err != nil {
		t.Fatal(err)
	}
	t.Run("in force, refused, the next occurrence", func(t *testing.T) {
		st := fleet().Schedules(ctx, now)
		next := good.Timestamp.Add(time.Hour).Truncate(time.Second) // occurrences fall on the second
		if st.Schedules != 1 || st.Refused != 1 || st.Overdue != 0 || st.Problem != "" || st.NextID != "hourly" || st.Next == nil || !st.Next.Equal(next) {
			t.Errorf("Schedules = %+v, want 1 in force, 1 refused, none overdue, next hourly at %s", st, next)
		}
	})
	t.Run("overdue once its next occurrence is due and not written", func(t *testing.T) {
		if st := fleet().Schedules(ctx, now.Add(61*time.Minute)); st.Overdue != 1 {
			t.Errorf("an hour and a minute later, with no scheduler: %+v, want 1 overdue", st)
		}
	})
}
