package kdelay_test

import (
	"fmt"
	"log"
	"time"

	"github.com/kdelay/kdelay"
)

// A schedule's first occurrence after a time, counted from its start: an
// @every keeps the phase of its first occurrence.
func ExampleSchedule_After() {
	start := time.Date(2026, 1, 10, 0, 0, 10, 0, time.UTC) // the record's timestamp
	f := kdelay.ScheduleFields{Spec: "@every 90s", Target: "reports"}
	s, _, err := kdelay.ParseSchedule(start, []byte("report"), f.Headers(), kdelay.Rules{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.After(time.Date(2026, 1, 10, 0, 5, 0, 0, time.UTC)).Format(time.RFC3339))
	// Output: 2026-01-10T00:06:10Z
}

// The headers that give a schedule again, as a producer writes them.
func ExampleSchedule_Fields() {
	f := kdelay.ScheduleFields{Spec: "0 30 2 * * *", TimeZone: "Europe/Berlin", Target: "reports", Count: "3"}
	s, _, err := kdelay.ParseSchedule(time.Now(), []byte("daily-report"), f.Headers(), kdelay.Rules{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", s.Fields())
	// Output: {Spec:0 30 2 * * * TimeZone:Europe/Berlin Target:reports Until: Count:3 Missed:}
}
