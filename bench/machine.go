package bench

import (
	"bufio"
	"os"
	"runtime"
	"strings"
)

// machineStart is what is read of the machine when a run starts: what it
// is, and its CPU counters, so that the steal over the run can be worked out
// at its end.
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
