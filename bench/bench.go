// Package bench measures how late kdelay delivers, per level and per hop
// count, beside what the machineAtStart itself achieves and beside the RocketMQ-style
// polling design, on the same broker in the same run. It is what
// `kdelay bench` runs.
//
// A record's lateness is the time a consumer of its target topic has it in
// hand minus its kdelay-deliver-at header, kept in HDR histograms with a
// microsecond resolution. Every run also measures the machineAtStart's floor: a
// timer that fires at a due time and produces the record straight to the
// target, read by the same consumer. kdelay cannot beat it; the gap between
// the two is what kdelay adds.
//
// Measuring and rendering stay apart. Run and Scale measure and return a
// Report, plain data defined in result.go; the renderers in render_*.go
// (WriteTable, WriteBenchfmt, WriteSVG, WriteJSON) take a Report and write
// it, and nothing that measures knows about them.
package bench

import (
	"context"
	"time"
)

// Run measures the forwarder on cfg's workload in each of cfg's modes, then
// compares its throughput with a raw copy, and checks the goals. Topics and
// groups it creates have a name of the run's own; on a real cluster it
// deletes its topics when done.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, ConfigError{err}
	}
	c, rep, machineAtStart, err := begin(&cfg)
	if err != nil {
		return nil, err
	}
	defer c.close()
	for _, mode := range cfg.Modes {
		res, err := measureMode(ctx, c, &cfg, mode)
		if err != nil {
			return nil, err
		}
		rep.Modes = append(rep.Modes, res)
	}
	if err := compare(ctx, c, &cfg, rep); err != nil {
		return nil, err
	}
	rep.Machine = machineAtStart.end()
	rep.Elapsed = time.Since(rep.Started)
	rep.Goals = checkGoals(rep)
	return rep, nil
}

// compare adds the throughput comparison with a raw copy, when the workload
// has one and the benchmark starts the forwarder itself.
func compare(ctx context.Context, c *cluster, cfg *Config, rep *Report) error {
	if _, attached := cfg.Runner.(Running); attached || cfg.Workload.Copy == 0 {
		return nil
	}
	res, err := compareCopy(ctx, c, cfg)
	if err != nil {
		return err
	}
	rep.Copy = res
	return nil
}

// begin opens the run's cluster and starts its report and the machine's
// measurements: what every benchmark does first. The caller closes the
// cluster.
func begin(cfg *Config) (*cluster, *Report, machineStart, error) {
	c, err := openCluster(cfg.Brokers, cfg.ClientOpts, cfg.Partitions, cfg.Logger)
	if err != nil {
		return nil, nil, machineStart{}, err
	}
	c.readOpts = readOpts(cfg.Delivery)
	rep := &Report{Started: time.Now(), Broker: c.String(), Runner: cfg.Runner.String(), Delivery: cfg.Delivery}
	return c, rep, startMachine(), nil
}
