package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

// envRestartBroker lets TestFaults restart the Apache Kafka broker of
// KDELAY_TEST_BROKERS with scripts/local-kafka (stop, then start with its
// data). Set it only for a broker that no other test uses meanwhile: run
// `go test -run TestFaults ./cmd/kdelay` on it alone.
const envRestartBroker = "KDELAY_TEST_RESTART_BROKER"

// TestFaults runs a short version of `kdelay bench faults` on each tier: the
// embedded broker, or the cluster of KDELAY_TEST_BROKERS. Whatever the
// fault, no record is lost and none is early; in exactly-once delivery, none
// is seen twice either, but for the one transaction that a SIGKILL of the
// embedded broker may commit twice. At-least-once duplicates and
// lateness are logged, not asserted.
func TestFaults(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills kdelay processes for about a minute; skipped with -short")
	}
	var brokers []string
	if env := os.Getenv(kafkatest.EnvBrokers); env != "" {
		brokers = strings.Split(env, ",")
	}
	scenarios := []string{bench.ScenarioKillRestart, bench.ScenarioScale, bench.ScenarioRoll}
	// The embedded broker is kdelay serve itself, of the scenario's own; a
	// real one is restarted only when the test may, and after the other
	// scenarios, which it would disturb.
	if len(brokers) == 0 {
		scenarios = append(scenarios, bench.ScenarioBrokerRestart)
	}
	set, err := levels.Parse([]string{"1s", "2s", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	run := faultScenario(binary(t), brokers, set, forwarder.AtLeastOnce)
	// Exactly-once also promises no duplicate to a read_committed consumer.
	once := faultScenario(binary(t), brokers, set, forwarder.ExactlyOnce)
	t.Run("in parallel", func(t *testing.T) {
		for _, name := range scenarios {
			t.Run(name, func(t *testing.T) { t.Parallel(); run(t, name) })
			t.Run("exactly-once/"+name, func(t *testing.T) { t.Parallel(); once(t, name) })
		}
	})
	if len(brokers) > 0 && os.Getenv(envRestartBroker) == "1" {
		t.Run(bench.ScenarioBrokerRestart, func(t *testing.T) { run(t, bench.ScenarioBrokerRestart) })
		t.Run("exactly-once/"+bench.ScenarioBrokerRestart, func(t *testing.T) { once(t, bench.ScenarioBrokerRestart) })
	}
}

// faultScenario returns a func that runs one scenario, short, and checks
// that no record was lost and none was early.
func faultScenario(bin string, brokers []string, set levels.Set, delivery forwarder.Delivery) func(t *testing.T, name string) {
	return func(t *testing.T, name string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		rep, err := bench.Faults(ctx, bench.FaultConfig{
			Brokers: brokers, Runner: bench.Command{Path: bin}, Scenarios: []string{name},
			Rate: faultRate, MaxDelay: 8 * time.Second, Duration: 8 * time.Second, FaultAt: 3 * time.Second,
			// Longer than an Apache Kafka broker takes to stop and start
			// again (about 35 s here): a record later than that would count
			// as lost. The run ends as soon as every record arrived.
			Grace: 90 * time.Second, BackTimeout: time.Minute,
			Levels: set, Partitions: 3, LocalKafka: "../../scripts/local-kafka", Delivery: delivery,
			// The group notices a killed process in seconds, not 45.
			ServeFlags: []string{"--session-timeout", "6s"},
		})
		if err != nil {
			t.Fatalf("Faults: %v", err)
		}
		var table strings.Builder
		_ = bench.WriteFaultTable(&table, rep)
		t.Logf("\n%s", table.String())
		if len(rep.Scenarios) != 1 {
			t.Fatalf("%d scenarios reported, want 1", len(rep.Scenarios))
		}
		s := rep.Scenarios[0]
		if s.Error != "" {
			t.Errorf("the scenario did not run to its end: %s", s.Error)
		}
		if len(s.Faults) != 1 || !s.Faults[0].BackOK {
			t.Errorf("faults %+v, want one, after which the system was back", s.Faults)
		}
		if s.Sent < 300 {
			t.Errorf("%d records sent, want the 400 written at 50/s for 8s (bar a few the broker refused)", s.Sent)
		}
		if s.Lost != 0 || s.Early != 0 {
			t.Errorf("%d of %d records lost and %d early (by up to %s); want none lost, none early", s.Lost, s.Sent, s.Early, s.MostEarly)
		}
		// A record the producer wrote twice is delivered twice: on the
		// embedded broker a SIGKILL can make a retried write land twice
		// (it keeps no producer sequence numbers across one).
		// A process stopped with SIGTERM hands what it holds back to the
		// ingress and commits before it leaves (forwarder/shutdown.go):
		// its successor re-delivers nothing, in either mode.
		cleanStops := name == bench.ScenarioScale || name == bench.ScenarioRoll
		if cleanStops && delivery == forwarder.AtLeastOnce && s.AddedIDs != 0 {
			t.Errorf("%d ids delivered more often than the ingress holds them (%d seen more than once); want none when every process stops cleanly",
				s.AddedIDs, s.DuplicateIDs)
		}
		// The embedded broker finishes a commit a SIGKILL interrupted
		// (third_party/kfake/README.md), as Apache Kafka does.
		if delivery == forwarder.ExactlyOnce && s.AddedIDs > 0 {
			t.Errorf("%d ids seen by a read_committed consumer more often than the ingress holds them (%d seen more than once, %d written twice); want none in exactly-once delivery",
				s.AddedIDs, s.DuplicateIDs, s.WrittenTwice)
		}
	}
}

// faultRate is the records a second TestFaults writes.
const faultRate = 50
