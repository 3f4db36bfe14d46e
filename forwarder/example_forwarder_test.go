package forwarder_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// A program runs kdelay's server in its own process: New checks the
// configuration, Run forwards until its context ends and returns once every
// forwarder has committed and left its group.
func ExampleForwarder_Run() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f, err := forwarder.New(forwarder.Config{
		Brokers: []string{"localhost:9092"},
		Logger:  slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Run(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("delivered %d records\n", f.Stats().Delivered)
}

// New says what is wrong with a Config, and how to fix it, before anything
// connects.
func ExampleNew() {
	_, err := forwarder.New(forwarder.Config{Partitions: -1})
	fmt.Println(err)
	// Output:
	// brokers: no seed brokers; list at least one host:port
	// partitions: -1; use at least 1
}

// A server with levels of its own forwards through a topic per level, all
// read in its one consumer group. Producers using package client need the
// same levels in their ProducerConfig.
func ExampleConfig_levels() {
	set, err := levels.Parse([]string{"1s", "10s", "1m", "10m", "1h"})
	if err != nil {
		log.Fatal(err)
	}
	c := forwarder.Config{Brokers: []string{"localhost:9092"}, Levels: set, Group: "kdelay-eu"}
	if _, err := forwarder.New(c); err != nil {
		log.Fatal(err)
	}
	for _, name := range set.Names() {
		fmt.Println(c.Topics.Level(name), c.Group)
	}
	// Output:
	// kdelay.level.1s kdelay-eu
	// kdelay.level.10s kdelay-eu
	// kdelay.level.1m kdelay-eu
	// kdelay.level.10m kdelay-eu
	// kdelay.level.1h kdelay-eu
}

// The defaults a zero Config gets, which kdelay serve has too.
func ExampleConfig_WithDefaults() {
	c := forwarder.Config{Brokers: []string{"localhost:9092"}}.WithDefaults()
	fmt.Println(c.Topics.Ingress(), len(c.Levels), "levels from", c.Levels.Smallest().Name, "to", c.Levels.Largest().Name)
	fmt.Println(c.Group, c.Mode, c.Delivery, c.CommitInterval, c.SessionTimeout)
	// Output:
	// kdelay.ingress 18 levels from 1s to 2h
	// kdelay exact at-least-once 1s 10s
}

// The consumer groups of the per-stage layout, whose offsets a kdelay server
// takes over once, and which an operator deletes afterwards.
func ExampleLevelGroup() {
	fmt.Println(forwarder.IngressGroup("kdelay"))
	fmt.Println(forwarder.LevelGroup("kdelay", "1s"))
	// Output:
	// kdelay.ingress
	// kdelay.level.1s
}
