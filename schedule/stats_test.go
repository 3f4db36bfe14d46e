package schedule

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestSchedulerStats checks what a scheduler reports for metrics: the
// schedules in force, the next occurrence it has yet to write, the
// occurrences written, and of those the ones written after their time: a
// schedule whose record says it began five minutes ago has its latest
// missed occurrence written at once, late.
func TestSchedulerStats(t *testing.T) {
	t.Parallel()
	inBubble(t, false, func(b *bubble) {
		s, err := New(b.cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		b.t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		target := b.collect("")
		b.schedule("every-minute", []byte("m"), kdelay.HeaderSchedule, "@every 1m", kdelay.HeaderTarget, b.target)
		missed := &kgo.Record{Topic: b.cfg.WithDefaults().Topics.Schedules(), Key: []byte("missed"), Value: []byte("x"),
			Timestamp: minute(0, 0).Add(-5 * time.Minute), Headers: []kgo.RecordHeader{
				{Key: kdelay.HeaderSchedule, Value: []byte("@every 2m")}, {Key: kdelay.HeaderTarget, Value: []byte(b.target)}}}
		if err := b.cl.ProduceSync(context.Background(), missed).FirstErr(); err != nil {
			t.Fatal(err)
		}
		// missed: 23:57 and 23:59 missed, 23:59 written at once, late,
		// then 00:01 and 00:03; every-minute: 00:01, 00:02, 00:03.
		target.Until(4*time.Minute, func(got []kafkatest.Arrival) bool { return len(got) >= 6 })
		time.Sleep(30 * time.Second) // to 00:03:30, between two steps
		st := s.Stats()
		// Written: every-minute to 00:04, missed to 00:03; both next at 00:05.
		if want := (Stats{Schedules: 2, Next: minute(5, 0), Occurrences: 7, Late: 1}); st.Schedules != want.Schedules ||
			!st.Next.Equal(want.Next) || st.Occurrences != want.Occurrences || st.Late != want.Late {
			t.Errorf("Stats() = %+v, want %+v", st, want)
		}
		b.schedule("missed", nil)
		for end := time.Now().Add(time.Minute); s.Stats().Schedules != 1 && time.Now().Before(end); {
			time.Sleep(time.Second)
		}
		if st := s.Stats(); st.Schedules != 1 {
			t.Errorf("after a delete, Stats().Schedules = %d, want 1", st.Schedules)
		}
	})
}
