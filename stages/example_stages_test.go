package stages_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/levels"
	"github.com/kdelay/kdelay/stages"
)

// The stages of a fleet with two levels, and the consumer group each is
// read with: what a tool reading kdelay's progress from Kafka asks for.
// Every stage is read with one group.
func ExampleConfig_Configured() {
	set, err := levels.Parse([]string{"1s", "1m"})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range (stages.Config{Group: "kdelay", Levels: set}).Configured() {
		fmt.Println(s.Name, s.Topic, s.Group, s.Wait)
	}
	// Output:
	// ingress kdelay.ingress kdelay 0s
	// 1s kdelay.level.1s kdelay 1s
	// 1m kdelay.level.1m kdelay 1m0s
}

// Level topics of the prefix that no configured level names: serve drains
// them, and a topic whose name is not a level is left alone.
func ExampleConfig_Dropped() {
	set, err := levels.Parse([]string{"1s"})
	if err != nil {
		log.Fatal(err)
	}
	dropped, not := stages.Config{Group: "kdelay", Levels: set}.Dropped([]string{"kdelay.level.1s", "kdelay.level.5m", "kdelay.level.soon"})
	for _, s := range dropped {
		fmt.Println("dropped", s.Topic, s.Group)
	}
	for _, n := range not {
		fmt.Println("not a level", n.Topic)
	}
	// Output:
	// dropped kdelay.level.5m kdelay
	// not a level kdelay.level.soon
}

// The consumer groups of the per-stage layout for a fleet that dropped a
// level: a process of the one-group layout takes over their committed
// offsets, after which they can be deleted.
func ExampleConfig_LegacyGroups() {
	set, err := levels.Parse([]string{"1s", "1m"})
	if err != nil {
		log.Fatal(err)
	}
	cfg := stages.Config{Group: "kdelay", Levels: set}
	dropped, _ := cfg.Dropped([]string{"kdelay.ingress", "kdelay.level.1s", "kdelay.level.1m", "kdelay.level.5m"})
	for _, g := range cfg.LegacyGroups(dropped) {
		fmt.Println(g)
	}
	// Output:
	// kdelay.ingress
	// kdelay.level.1s
	// kdelay.level.1m
	// kdelay.level.5m
}

// How many records each stage's group has not committed, as kdelay status
// and the kdelay_pending_records gauge count them. It needs a broker, so
// it has no output here.
func ExampleReadOffsets() {
	cl, err := kgo.NewClient(kgo.SeedBrokers("localhost:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	ss := stages.Config{Group: "kdelay", Levels: levels.Default()}.Configured()
	offs, err := stages.ReadOffsets(context.Background(), kadm.NewClient(cl), ss)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range ss {
		n, err := offs.Pending(s)
		fmt.Println(s.Name, n, err) // err: a figure missing, such as a topic that does not exist
	}
}
