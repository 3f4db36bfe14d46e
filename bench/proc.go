package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 on
// every architecture Linux and Go share.
const userHZ = 100

// procUsage reads a process's CPU time and resident memory from /proc
// (Linux only; elsewhere it fails).
func procUsage(pid int) (Usage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Usage{}, err
	}
	// The command name in parentheses may hold spaces: count fields after
	// its closing parenthesis, where field 3, the state, comes first.
	fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	if len(fields) < 13 {
		return Usage{}, fmt.Errorf("/proc/%d/stat has %d fields after the command name, want at least 13", pid, len(fields))
	}
	utime, err1 := strconv.ParseInt(string(fields[11]), 10, 64)
	stime, err2 := strconv.ParseInt(string(fields[12]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Usage{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Usage{}, err
	}
	return Usage{
		CPU:      time.Duration(utime+stime) * time.Second / userHZ,
		RSS:      statusBytes(status, "VmRSS:"),
		PeakRSS:  statusBytes(status, "VmHWM:"),
		Measured: true,
	}, nil
}

// statusBytes reads a "Name:   1234 kB" line of /proc/<pid>/status.
func statusBytes(status []byte, name string) int64 {
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte(name)); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				return 0
			}
			kb, _ := strconv.ParseInt(string(f[0]), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuTimes reads the machine's total and stolen CPU time from /proc/stat,
// in USER_HZ ticks; both are 0 where there is no /proc/stat.
func cpuTimes() (total, steal int64) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	// cpu user nice system idle iowait irq softirq steal guest guest_nice;
	// guest time is already counted in user.
	f := bytes.Fields(line)
	for i := 1; i < len(f) && i <= 8; i++ {
		v, _ := strconv.ParseInt(string(f[i]), 10, 64)
		total += v
		if i == 8 {
			steal = v
		}
	}
	return total, steal
}
