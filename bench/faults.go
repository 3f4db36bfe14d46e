package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// The fault scenarios Faults runs, each on `kdelay serve` processes of its
// own, started by Command.
const (
	// ScenarioKillRestart: one kdelay serve, SIGKILLed and started again at
	// once, as systemd or Kubernetes would.
	ScenarioKillRestart = "kill-restart"
	// ScenarioKill: three kdelay serve in one group; one is SIGKILLed for
	// good and the other two take over its partitions.
	ScenarioKill = "kill"
	// ScenarioBrokerRestart: one kdelay serve, its broker stopped and
	// started again with its data. The embedded broker is kdelay serve
	// itself, so there it is a SIGKILL and restart of a serve that runs its
	// own broker; on Apache Kafka it is `scripts/local-kafka stop` then
	// `KAFKA_KEEP_DATA=1 scripts/local-kafka start`, kdelay untouched.
	ScenarioBrokerRestart = "broker-restart"
	// ScenarioScale: three kdelay serve, two stopped with SIGTERM, then two
	// started again: 3 → 1 → 3.
	ScenarioScale = "scale"
	// ScenarioRoll: three kdelay serve restarted one after the other, as
	// a rolling deploy does: each stopped with SIGTERM and started again
	// with its instance id, the next once every group is stable again.
	ScenarioRoll = "roll"

	// The cluster scenarios run two kdelay serve on a 3-node cluster that
	// `KAFKA_NODES=3 scripts/local-kafka start` started, and fault its
	// Kafka nodes, kdelay untouched.

	// ScenarioNodeKill: one node SIGKILLed (which one: NodeRole) and
	// started again with its data after NodeDown.
	ScenarioNodeKill = "node-kill"
	// ScenarioNodeRoll: every node stopped with SIGTERM and started again,
	// one after the other, the next once the last is back in the ISR of
	// every partition it replicates: a rolling restart.
	ScenarioNodeRoll = "node-roll"
	// ScenarioQuorumLoss: two of the three nodes SIGKILLed at once (the
	// one NodeRole picks and the next), both started again after NodeDown.
	ScenarioQuorumLoss = "quorum-loss"
)

// Scenarios are the fault scenarios that run on any broker, in the order
// Faults runs them: those it runs when none are named.
var Scenarios = []string{ScenarioKillRestart, ScenarioKill, ScenarioBrokerRestart, ScenarioScale, ScenarioRoll}

// ClusterScenarios are the scenarios that need a local-kafka cluster of 3
// nodes, in the order Faults runs them.
var ClusterScenarios = []string{ScenarioNodeKill, ScenarioNodeRoll, ScenarioQuorumLoss}

// FaultConfig configures Faults. The zero value of every field is replaced
// by its default in WithDefaults.
type FaultConfig struct {
	// Brokers are the seed brokers of the cluster to run on. Default: none,
	// which runs an embedded kfake broker in this process (and, for
	// broker-restart, a kdelay serve with its own embedded broker).
	Brokers []string

	// Runner starts each kdelay serve. Default Command{}: this executable.
	Runner Command

	// Scenarios to run, one after the other. Default all of Scenarios.
	Scenarios []string

	// Rate is records per second written to the ingress. Default 200.
	Rate int
	// MaxDelay: each record's delay is uniform from 0 to MaxDelay, to the
	// millisecond. Default 60s.
	MaxDelay time.Duration
	// Duration is how long records are written, per scenario. Default 60s.
	Duration time.Duration
	// FaultAt is when, after writing starts, the first fault is injected.
	// Default 15s.
	FaultAt time.Duration
	// Faults is how many times the fault is injected per scenario, each
	// Every after the last one started, and never before the system is back
	// from it; only while records are still being written. kill stops at
	// one instance left. Default 1.
	Faults int
	// Every is the time from one fault's start to the next. Default 20s.
	Every time.Duration

	// Grace is how long after its due time a record may arrive; later, it
	// is lost. Default 2m: longer than a session timeout of 45s and the
	// rebalance after it.
	Grace time.Duration
	// BackTimeout is how long the system may take to be back after a fault
	// (every group stable with the instances that should be running);
	// after that the fault's window ends and the run goes on. Default 2m.
	BackTimeout time.Duration
	// Settle is how long the collector keeps reading after every record
	// arrived, for late duplicates. Default 3s.
	Settle time.Duration

	// Levels are kdelay serve's delay levels. Default levels.Default().
	Levels levels.Set
	// Partitions of every topic created. Default 6.
	Partitions int32
	// Delivery is every kdelay serve's --delivery. Default
	// forwarder.DefaultDelivery, at-least-once.
	Delivery forwarder.Delivery
	// ServeFlags are added to every kdelay serve's command line, e.g.
	// --session-timeout 6s.
	ServeFlags []string
	// MaxDuplicates is a goal in at-least-once delivery: the share of the
	// ids sent that kdelay may deliver more than once (AddedIDs / Sent).
	// 0 judges none; exactly-once always wants none.
	MaxDuplicates float64
	// ReadCommitted makes the collector read with isolation.level=
	// read_committed, as a consumer of a transactional delivery must.
	// Default: true with exactly-once delivery, which promises nothing to
	// any other reader; false otherwise (read_uncommitted, Kafka's
	// default).
	ReadCommitted bool
	// LocalKafka is the scripts/local-kafka that broker-restart runs on
	// --brokers; it controls the broker on the port of Brokers[0]. The
	// cluster scenarios run it with KAFKA_NODES=3 and the port of node 1.
	// Default scripts/local-kafka, from the working directory.
	LocalKafka string
	// NodeRole picks the node node-kill kills and the first of the two
	// quorum-loss kills: one of NodeRoles. Default NodeLeader.
	NodeRole string
	// NodeDown is how long a node node-kill or quorum-loss kills stays
	// down before it is started again. Default 5s.
	NodeDown time.Duration

	// Seed makes the random delays repeatable. Default 1.
	Seed uint64
	// Progress receives a progress bar; nil shows none.
	Progress io.Writer
	// Logger receives the driver's logs. Default: discard.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c FaultConfig) WithDefaults() FaultConfig {
	if len(c.Scenarios) == 0 {
		c.Scenarios = Scenarios
	}
	c.Rate = cmp.Or(c.Rate, 200)
	c.MaxDelay = cmp.Or(c.MaxDelay, time.Minute)
	c.Duration = cmp.Or(c.Duration, time.Minute)
	c.FaultAt = cmp.Or(c.FaultAt, 15*time.Second)
	c.Faults = cmp.Or(c.Faults, 1)
	c.Every = cmp.Or(c.Every, 20*time.Second)
	c.Grace = cmp.Or(c.Grace, 2*time.Minute)
	c.BackTimeout = cmp.Or(c.BackTimeout, 2*time.Minute)
	c.Settle = cmp.Or(c.Settle, 3*time.Second)
	c.Delivery = cmp.Or(c.Delivery, forwarder.DefaultDelivery)
	c.ReadCommitted = c.ReadCommitted || c.Delivery == forwarder.ExactlyOnce
	if len(c.Levels) == 0 {
		c.Levels = levels.Default()
	}
	c.Partitions = cmp.Or(c.Partitions, 6)
	c.LocalKafka = cmp.Or(c.LocalKafka, "scripts/local-kafka")
	c.NodeRole = cmp.Or(c.NodeRole, NodeLeader)
	c.NodeDown = cmp.Or(c.NodeDown, 5*time.Second)
	c.Seed = cmp.Or(c.Seed, 1)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c FaultConfig) validate() error {
	errs := []error{validDelivery(c.Delivery), checkServeFlags(c.ServeFlags)}
	all := slices.Concat(Scenarios, ClusterScenarios)
	for _, s := range c.Scenarios {
		if !slices.Contains(all, s) {
			errs = append(errs, fmt.Errorf("scenarios: %q is not a scenario; pick from %s", s, strings.Join(all, ", ")))
		}
	}
	errs = append(errs, c.validateCluster())
	for name, n := range map[string]int{"rate": c.Rate, "faults": c.Faults} {
		if n < 0 {
			errs = append(errs, fmt.Errorf("%s: %d is negative; use at least 1", name, n))
		}
	}
	for name, d := range map[string]time.Duration{
		"max-delay": c.MaxDelay, "duration": c.Duration, "fault-at": c.FaultAt, "every": c.Every,
		"grace": c.Grace, "back-timeout": c.BackTimeout, "settle": c.Settle, "node-down": c.NodeDown,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative; use a positive duration", name, d))
		}
	}
	if c.FaultAt >= c.Duration {
		errs = append(errs, fmt.Errorf("fault-at: %s is not before the end of writing (duration %s); inject the fault while records are written", c.FaultAt, c.Duration))
	}
	if c.MaxDuplicates < 0 || c.MaxDuplicates > 1 {
		errs = append(errs, fmt.Errorf("max-duplicates: %g is not a share of the ids from 0 to 1 (0%% to 100%%)", c.MaxDuplicates))
	}
	if c.MaxDuplicates > 0 && c.Delivery == forwarder.ExactlyOnce {
		errs = append(errs, errors.New("max-duplicates: exactly-once already wants no id delivered twice; leave it out"))
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d; use at least 1", c.Partitions))
	}
	return errors.Join(errs...)
}

// records is how many records a scenario writes.
func (c FaultConfig) records() int { return int(float64(c.Rate) * c.Duration.Seconds()) }

// deadline bounds a scenario whatever hangs: writing, the longest delay, the
// grace, and every fault's way back.
func (c FaultConfig) deadline() time.Duration {
	return c.Duration + c.MaxDelay + c.Grace + time.Duration(c.Faults+2)*c.BackTimeout + 2*time.Minute
}

// isolation is the collector's isolation level, as the report names it.
func (c FaultConfig) isolation() string {
	if c.ReadCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// collectorOpts are the collector's consumer options beyond the cluster's.
func (c FaultConfig) collectorOpts() []kgo.Opt {
	if c.ReadCommitted {
		return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted())}
	}
	return nil
}

// Faults runs each scenario of cfg with topics, groups and kdelay serve
// processes of its own, and reports what arrived. Every wait has a
// deadline: a scenario that hangs ends with what it measured and its
// error in the report, and the next one runs. Faults fails only for a
// configuration that cannot run.
func Faults(ctx context.Context, cfg FaultConfig) (*FaultReport, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, ConfigError{err}
	}
	rep := &FaultReport{
		Started: time.Now(), Broker: brokerName(cfg.Brokers), Delivery: cfg.Delivery, Isolation: cfg.isolation(), ServeFlags: cfg.ServeFlags,
		Rate: cfg.Rate, MaxDelay: cfg.MaxDelay, Duration: cfg.Duration, Grace: cfg.Grace,
	}
	if err := checkCluster(ctx, cfg); err != nil {
		return nil, ConfigError{err}
	}
	if len(clusterScenarios(cfg.Scenarios)) > 0 {
		rep.NodeRole = cfg.NodeRole
	}
	machineAtStart := startMachine()
	runPrefix := newRunPrefix()
	for _, name := range cfg.Scenarios {
		if ctx.Err() != nil {
			break
		}
		rep.Scenarios = append(rep.Scenarios, runScenario(ctx, &cfg, scenarioByName(name), runPrefix))
	}
	rep.Goals = faultGoals(rep.Scenarios, cfg.Delivery, cfg.BackTimeout, cfg.MaxDuplicates)
	rep.Machine = machineAtStart.end()
	rep.Elapsed = time.Since(rep.Started)
	return rep, nil
}

func brokerName(brokers []string) string {
	if len(brokers) == 0 {
		return "embedded"
	}
	return strings.Join(brokers, ",")
}
