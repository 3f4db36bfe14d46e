package schedule_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kdelay/kdelay/schedule"
)

// Run a scheduler of recurring schedules, and read what it holds and wrote,
// as /metrics does.
func ExampleScheduler_Stats() {
	s, err := schedule.New(schedule.Config{Brokers: []string{"localhost:9092"}, InstanceID: "kdelay-0"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				log.Fatal(err)
			}
			return
		case <-tick.C:
			st := s.Stats()
			fmt.Println(st.Schedules, "schedules; next", st.Next, "; written", st.Occurrences, "of which late", st.Late)
		}
	}
}
