package bench

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// SoakSample is what a soak read at one moment: of the kdelay serve under
// test, of the embedded broker's process, and of the records.
type SoakSample struct {
	At time.Duration `json:"at_ns"` // since the load started

	Serve ProcSample `json:"serve"`
	// Broker is the process of the embedded broker; nil on a cluster.
	Broker *ProcSample `json:"broker,omitempty"`
	// BrokerLog is the size of the embedded broker's data directory: the
	// records it keeps, which grow until retention drops them. 0 on a
	// cluster.
	BrokerLog int64 `json:"broker_log_bytes,omitempty"`

	Sent    int64 `json:"sent"`    // records written so far
	Arrived int64 `json:"arrived"` // distinct records read from the target so far
	// Late is the lateness of the delayed records that arrived since the
	// sample before; Floor, of the floor's.
	Late  Window `json:"late"`
	Floor Window `json:"floor"`

	Error string `json:"error,omitempty"` // what could not be read
}

// ProcSample is what a process had at one moment, from its /metrics and
// /proc. A figure that could not be read is -1.
type ProcSample struct {
	RSS        int64 `json:"rss_bytes"`
	HeapInuse  int64 `json:"heap_inuse_bytes"` // spans in use: live objects and garbage not yet collected
	HeapLive   int64 `json:"heap_live_bytes"`  // what the last collection found live
	Goroutines int64 `json:"goroutines"`
	OpenFDs    int64 `json:"open_fds"`
	TCPConns   int64 `json:"tcp_conns"` // established; -1 without the process's pid
	// CPU is the process's CPU time so far, user and system.
	CPU time.Duration `json:"cpu_ns"`
}

// unread is a ProcSample with nothing read yet.
func unread() ProcSample {
	return ProcSample{RSS: -1, HeapInuse: -1, HeapLive: -1, Goroutines: -1, OpenFDs: -1, TCPConns: -1, CPU: -1}
}

// cpuShare is the CPU the process used from prev to p, over the time
// between them, in percent of a core; false if either lacks it.
func cpuShare(p, prev ProcSample, elapsed time.Duration) (float64, bool) {
	if elapsed <= 0 || p.CPU < 0 || prev.CPU < 0 {
		return 0, false
	}
	return 100 * float64(p.CPU-prev.CPU) / float64(elapsed), true
}

// Window is the lateness of the records of a group that arrived between
// two samples.
type Window struct {
	N   int64         `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// record takes a soak's sample and writes its progress line.
func (r *soakRun) record(ctx context.Context, at time.Duration) {
	r.rep.Samples = append(r.rep.Samples, r.sample(ctx, at))
	writeSoakProgress(r.cfg.Progress, r.rep)
}

// sample reads the processes and the lateness of what arrived since the
// sample before.
func (r *soakRun) sample(ctx context.Context, at time.Duration) SoakSample {
	s := SoakSample{At: at}
	var errs []error
	s.Serve, errs = readProc(ctx, r.http, r.serve)
	if b := r.broker; b != nil {
		bs, err := readProc(ctx, r.http, b.watched)
		s.Broker, errs = &bs, append(errs, err...)
		s.BrokerLog = dirSize(b.dataDir)
	}
	_, arrived := r.coll.counts()
	s.Sent, s.Arrived = r.s.sent.Load(), int64(arrived)
	s.Late, s.Floor = r.coll.window(&r.dueWin), r.coll.window(&r.floorWin)
	if err := errors.Join(errs...); err != nil {
		s.Error = err.Error()
	}
	return s
}

// latenessWindow remembers a group's histogram as of the last sample, so
// that the next one can tell what arrived in between.
type latenessWindow struct {
	g    *lateness
	last []int64 // histogram counts at the last sample
}

// window is the lateness of the records of w's group that arrived since
// the last call.
func (c *collector) window(w *latenessWindow) Window {
	c.mu.Lock()
	snap := w.g.h.Export()
	c.mu.Unlock()
	now := slices.Clone(snap.Counts)
	for i := range min(len(w.last), len(snap.Counts)) {
		snap.Counts[i] -= w.last[i]
	}
	w.last = now
	h := hdrhistogram.Import(snap)
	if h.TotalCount() == 0 {
		return Window{}
	}
	q := func(p float64) time.Duration { return time.Duration(h.ValueAtQuantile(p)) * time.Microsecond }
	return Window{N: h.TotalCount(), P50: q(50), P99: q(99), Max: time.Duration(h.Max()) * time.Microsecond}
}
