package bench

import "time"

// procWatch reads a process of one rate's run from /proc as the load
// runs: its resident memory's high-water mark, and its CPU time from the
// first read at or after from (the warm-up) to the last.
type procWatch struct {
	pid         int
	from        time.Duration
	peak        int64
	first, last cpuRead
	reads       int // at or after from
}

// cpuRead is a process's CPU time at a time into the run.
type cpuRead struct{ at, cpu time.Duration }

// read reads the process at a time into the run; a nil w reads nothing,
// and what cannot be read is left out.
func (w *procWatch) read(at time.Duration) {
	if w == nil {
		return
	}
	u, err := procUsage(w.pid)
	if err != nil {
		return
	}
	w.peak = max(w.peak, u.RSS, u.PeakRSS)
	if at < w.from {
		return
	}
	if w.reads == 0 {
		w.first = cpuRead{at, u.CPU}
	}
	w.last = cpuRead{at, u.CPU}
	w.reads++
}

// figures are what w read and what the process used over its life, read
// as it stopped: its peak RSS the higher of the two, CPU from the reads.
func (w *procWatch) figures(life Usage) SweepProc {
	p := SweepProc{PeakRSS: -1, CPU: -1}
	if w == nil {
		return p
	}
	if peak := max(w.peak, life.PeakRSS); peak > 0 {
		p.PeakRSS = peak
	}
	if span := w.last.at - w.first.at; w.reads >= 2 && span > 0 {
		p.CPU = 100 * float64(w.last.cpu-w.first.cpu) / float64(span)
	}
	return p
}
