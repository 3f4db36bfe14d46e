package fleet_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kdelay/kdelay/fleet"
)

// Read what waits in each level of a fleet, and when it moves on.
func Example() {
	f, err := fleet.New(fleet.Config{Brokers: []string{"localhost:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	levels, err := f.Status(context.Background(), time.Now(), fleet.DefaultEdges())
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range levels {
		fmt.Println(l.Level, l.Pending, l.Departures.Bins)
	}
}

// Find where the message with a kdelay-id waits, within the default bounds.
func ExampleFleet_Find() {
	f, err := fleet.New(fleet.Config{Brokers: []string{"localhost:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	s, err := f.Find(context.Background(), "order-42", fleet.FindLimits{}, time.Now(), nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range s.Found {
		fmt.Println(m.Place(), m.Due)
	}
	fmt.Println("complete:", s.Complete, s.Stopped)
}

// Read the recurring schedules of a fleet: how many, the next occurrence,
// and how many are overdue.
func ExampleFleet_Schedules() {
	f, err := fleet.New(fleet.Config{Brokers: []string{"localhost:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	s := f.Schedules(context.Background(), time.Now())
	if s.Problem != "" {
		log.Fatal(s.Problem)
	}
	fmt.Println(s.Schedules, "in force; overdue:", s.Overdue)
	if s.Next != nil {
		fmt.Println("next:", s.NextID, s.Next)
	}
}
