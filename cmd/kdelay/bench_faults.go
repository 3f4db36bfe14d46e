package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// faultFlags are the flags of `kdelay bench faults` beyond those of bench.
type faultFlags struct {
	cfg           bench.FaultConfig
	levels        []string
	maxDuplicates string // a share: 1% or 0.01
	records       string // --records: the CSV of every record
}

func newBenchFaults(f *benchFlags) *cobra.Command {
	var ff faultFlags
	cmd := &cobra.Command{
		Use:   "faults",
		Short: "Inject faults (kill, restart, broker restart, scaling, Kafka node failures) under a steady load and count lost, early and duplicate records",
		Long: `Write records to kdelay's ingress at a steady rate, each delayed uniformly from 0 to
--max-delay with an id of its own, inject a fault, and read the target: records lost
(not arrived within due + --grace), early (arrived before kdelay-deliver-at), delivered
more than once, and lateness over all records and over those due during the fault (from
its start until every consumer group is stable again). Each scenario runs its own
kdelay serve processes, topics and groups:

  kill-restart    1 kdelay serve, SIGKILLed and started again at once
  kill            3 kdelay serve, one SIGKILLed for good
  broker-restart  1 kdelay serve, its broker stopped and started with its data: on the
                  embedded broker, a kdelay serve running its own, SIGKILLed and restarted;
                  with --brokers, 'scripts/local-kafka stop' then 'KAFKA_KEEP_DATA=1
                  scripts/local-kafka start' on the broker's port
  scale           3 kdelay serve, two stopped with SIGTERM, then two started: 3 -> 1 -> 3
  roll            3 kdelay serve restarted one after the other (SIGTERM, start with the
                  same instance id), the next once every group is stable: a rolling deploy

The cluster scenarios run only when named, on the 3 nodes of a cluster that
'KAFKA_NODES=3 scripts/local-kafka start' started (--brokers: what it prints), with 2
kdelay serve; after a fault the system is back once every node serves too:

  node-kill       the node --node-role picks SIGKILLed, started again with its data
                  after --node-down
  node-roll       each node stopped with SIGTERM and started again, the next once it
                  is back in the ISR of every partition it holds (controller last)
  quorum-loss     the node --node-role picks and the next SIGKILLed at once, both
                  started again after --node-down

--node-role is leader (of the most partitions of the target), group-coordinator (of
the ingress router's group), txn-coordinator (of a kdelay serve's transactions; with
--delivery exactly-once) or controller (the active KRaft controller).

With --delivery exactly-once every kdelay serve runs it and the target is read with
isolation.level=read_committed.

Each scenario also measures its floor, through the same faults: for every record, a
timer fires at its due time and a plain producer (acks=all, idempotent, no linger)
writes a twin to a floor topic of the scenario, read as the target is. MAX−FLOOR is
kdelay's max lateness less the floor's: what kdelay adds to Kafka's own recovery.

The command fails when a scenario misses a goal, or did not run to its end: none lost,
none early, the system back after every fault within --back-timeout (counted once the
fault is injected: for node-kill, once the node is started again), and with --delivery
exactly-once no id delivered twice by kdelay (an id the ingress itself holds twice is two
records). At-least-once duplicates are shown, not judged: that mode promises them.

Every wait has a deadline: a scenario that hangs ends with what it measured. The
defaults take about 3 minutes per scenario.`,
		Example: `  kdelay bench faults --json faults.json
  kdelay bench faults --delivery exactly-once --json faults-eos.json
  kdelay bench faults --scenarios kill-restart,scale --duration 10s --max-delay 8s --rate 50
  kdelay bench faults --brokers "$(scripts/local-kafka start)"
  kdelay bench faults --brokers "$(KAFKA_NODES=3 scripts/local-kafka start)" --scenarios node-kill,node-roll,quorum-loss
  kdelay bench faults --brokers 127.0.0.1:19992,127.0.0.1:19994,127.0.0.1:19996 --scenarios node-kill --node-role txn-coordinator --delivery exactly-once`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := ff.config(f, cmd.Flags().Changed("grace"))
			if err != nil {
				return usageError{err}
			}
			defer f.close()
			rep, err := bench.Faults(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return f.writeFaults(rep, ff.records, cmd.OutOrStdout())
		},
	}
	d := bench.FaultConfig{}.WithDefaults()
	fl := cmd.Flags()
	fl.StringSliceVar(&ff.cfg.Scenarios, "scenarios", bench.Scenarios, "fault scenarios to run, one after the other; the cluster scenarios ("+strings.Join(bench.ClusterScenarios, ", ")+") only when named")
	fl.IntVar(&ff.cfg.Rate, "rate", d.Rate, "records per second written to the ingress")
	fl.DurationVar(&ff.cfg.MaxDelay, "max-delay", d.MaxDelay, "each record's delay is uniform from 0 to this")
	fl.DurationVar(&ff.cfg.Duration, "duration", d.Duration, "how long records are written, per scenario")
	fl.DurationVar(&ff.cfg.FaultAt, "fault-at", d.FaultAt, "when the first fault is injected, after writing starts")
	fl.IntVar(&ff.cfg.Faults, "faults", d.Faults, "faults per scenario, while records are written")
	fl.DurationVar(&ff.cfg.Every, "every", d.Every, "time from one fault's start to the next")
	fl.DurationVar(&ff.cfg.BackTimeout, "back-timeout", d.BackTimeout, "how long the system may take to be back after a fault")
	fl.DurationVar(&ff.cfg.Settle, "settle", d.Settle, "how long to read on after every record arrived, for late duplicates")
	fl.StringSliceVar(&ff.levels, "levels", d.Levels.Names(), "kdelay serve's delay levels")
	fl.StringArrayVar(&ff.cfg.ServeFlags, "serve-flag", nil, "a flag for every kdelay serve, e.g. --serve-flag=--session-timeout=6s; repeat for more")
	fl.StringVar(&ff.maxDuplicates, "max-duplicates", "", "goal in at-least-once: at most this share of the ids sent delivered more than once, e.g. 1%; unset judges none (exactly-once always wants none)")
	fl.BoolVar(&ff.cfg.ReadCommitted, "read-committed", false, "read the target with isolation.level=read_committed; --delivery exactly-once always does")
	fl.StringVar(&ff.cfg.LocalKafka, "local-kafka", d.LocalKafka, "with --brokers: the script that broker-restart restarts the broker with, and the cluster scenarios its nodes")
	fl.StringVar(&ff.cfg.NodeRole, "node-role", d.NodeRole, "the node node-kill and quorum-loss kill: "+strings.Join(bench.NodeRoles, ", "))
	fl.DurationVar(&ff.cfg.NodeDown, "node-down", d.NodeDown, "how long a node node-kill or quorum-loss kills stays down")
	fl.Uint64Var(&ff.cfg.Seed, "seed", d.Seed, "seed of the random delays")
	fl.StringVar(&ff.records, "records", "", "write every record, kdelay's and the floor's, as CSV to this file: when each was due and arrived, to find which were late and why")
	return cmd
}

// config is the FaultConfig the flags ask for; bench's --grace counts only
// when given, since its default is too short for a session timeout.
func (ff *faultFlags) config(f *benchFlags, graceSet bool) (bench.FaultConfig, error) {
	switch {
	case f.measureRunning || f.runInProcess:
		return bench.FaultConfig{}, errors.New("--running and --in-process do not apply to faults: it starts, kills and restarts kdelay serve processes of its own")
	case f.svg != "" || f.benchfmt != "":
		return bench.FaultConfig{}, errors.New("--svg and --benchfmt do not apply to faults: use --json")
	}
	set, err := levels.Parse(ff.levels)
	if err != nil {
		return bench.FaultConfig{}, fmt.Errorf("levels: %w", err)
	}
	runner, err := f.forwarderRunner()
	if err != nil {
		return bench.FaultConfig{}, err
	}
	cfg := ff.cfg
	if cfg.MaxDuplicates, err = parseShare(ff.maxDuplicates); err != nil {
		return bench.FaultConfig{}, fmt.Errorf("max-duplicates: %w", err)
	}
	cfg.Runner, _ = runner.(bench.Command)
	cfg.Brokers, cfg.Partitions, cfg.Levels = f.brokers, f.partitions, set
	cfg.Delivery = forwarder.Delivery(f.delivery)
	if graceSet {
		cfg.Grace = f.grace
	}
	cfg.Progress, cfg.Logger = f.progress(), logger()
	return cfg, nil
}

// writeFaults prints the tables and writes --json and --records (records
// names its file); a goal missed or a scenario that did not run to its end
// makes the command fail, after its figures are out.
func (f *benchFlags) writeFaults(rep *bench.FaultReport, records string, out io.Writer) error {
	if err := bench.WriteFaultTable(out, rep); err != nil {
		return err
	}
	type file = reportFile[*bench.FaultReport]
	if err := writeFiles(rep, file{f.json, bench.WriteFaultJSON}, file{records, bench.WriteFaultRecords}); err != nil {
		return err
	}
	if rep.Met() {
		return nil
	}
	missed := missedGoals(rep.Goals)
	for _, s := range rep.Scenarios {
		if s.Error != "" {
			missed = append(missed, fmt.Sprintf("%s ended early: %s", s.Scenario, s.Error))
		}
	}
	return fmt.Errorf("faults failed: %s", strings.Join(missed, "; "))
}

// parseShare reads a share as a percentage (1%) or a fraction (0.01); "" is 0.
func parseShare(s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	text, scale := s, 1.0
	if t, ok := strings.CutSuffix(s, "%"); ok {
		text, scale = t, 100
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || f < 0 || f/scale > 1 {
		return 0, fmt.Errorf("%q is not a share from 0 to 1; write it as 1%% or 0.01", s)
	}
	return f / scale, nil
}
