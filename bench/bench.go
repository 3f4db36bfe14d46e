// Package bench measures how late kdelay delivers, per level and per hop
// count, beside what the machine itself achieves and beside the RocketMQ-style
// polling design, on the same broker in the same run. It is what
// `kdelay bench` runs.
//
// A record's lateness is the time a consumer of its target topic has it in
// hand minus its kdelay-deliver-at header, kept in HDR histograms with a
// microsecond resolution. Every run also measures the machine's floor: a
// timer that fires at a due time and produces the record straight to the
// target, read by the same consumer. kdelay cannot beat it; the gap between
// the two is what kdelay adds.
package bench

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"strings"
	"time"
)

// Run measures the forwarder on cfg's workload in each of cfg's modes, then
// compares its throughput with a raw copy, and checks the goals. Topics and
// groups it creates have a name of the run's own; on a real cluster it
// deletes its topics when done.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, err := openCluster(cfg.Brokers, cfg.ClientOpts, cfg.Partitions, cfg.Logger)
	if err != nil {
		return nil, err
	}
	defer c.close()
	rep := &Report{Started: time.Now(), Broker: c.String(), Runner: cfg.Runner.String()}
	machine := startMachine()
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
	rep.Machine = machine.end()
	rep.Elapsed = time.Since(rep.Started)
	rep.Goals = goals(rep)
	return rep, nil
}

// compare adds the throughput comparison with a raw copy, when the workload
// has one and the benchmark starts the forwarder itself.
func compare(ctx context.Context, c *cluster, cfg *Config, rep *Report) error {
	if _, running := cfg.Runner.(Running); running || cfg.Workload.Copy == 0 {
		return nil
	}
	res, err := compareCopy(ctx, c, cfg)
	if err != nil {
		return err
	}
	rep.Copy = res
	return nil
}

// Machine is what the run ran on.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Model      string `json:"cpu_model"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	// Steal is the share of all CPU time the hypervisor gave to others
	// during the run, from /proc/stat; -1 where it cannot be read.
	Steal float64 `json:"steal"`
}

type machineStart struct {
	m            Machine
	total, steal int64
}

func startMachine() machineStart {
	total, steal := cpuTimes()
	return machineStart{
		m: Machine{
			CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Model: cpuModel(),
			Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		},
		total: total, steal: steal,
	}
}

func (s machineStart) end() Machine {
	total, steal := cpuTimes()
	s.m.Steal = -1
	if total > s.total {
		s.m.Steal = float64(steal-s.steal) / float64(total-s.total)
	}
	return s.m
}

// cpuModel is the "model name" of /proc/cpuinfo, or "" where there is none.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
