//go:build unix

package bench

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// selfCPU is the user and system time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// exitUsage is what a child process used over its life, read once it has
// been waited for.
func exitUsage(ps *os.ProcessState) (Usage, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return Usage{}, false
	}
	peak := int64(ru.Maxrss)
	if runtime.GOOS == "linux" {
		peak *= 1024 // kilobytes there, bytes on the BSDs and macOS
	}
	return Usage{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), PeakRSS: peak}, true
}
