package forwarder

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
)

// readCommands starts the control topic's reader in g and waits until it has
// read every command written before now, so that no record is forwarded
// before the commands that govern it are known.
func (f *Forwarder) readCommands(ctx context.Context, g *errgroup.Group, cl *kgo.Client) error {
	f.cmds = newCommands(f.cfg.commandTTL(), f.cfg.Logger)
	r := newControlReader(&f.cfg, f.cmds, cl)
	r.onDue = f.nudgeAll
	r.duty = f.reportsUnmatched
	r.onNotice = func(instance string, at time.Time) { f.beats.heard(instance, f.cfg.InstanceID, at, f.cfg.NowFunc()) }
	g.Go(func() error { return r.run(ctx) })
	select {
	case <-r.loaded:
		live := f.cmds.n.Load()
		f.cfg.Logger.Info("commands_loaded", "topic", f.cfg.Topics.Control(), "live", live)
		if live >= releaseAfterLoading {
			// Reading them allocated several times what the table keeps
			// (every fetched record), and nothing else will allocate
			// enough to make the runtime give it back soon.
			f.cfg.freeMemory()
		}
		return nil
	case <-time.After(loadTimeout):
		// Loading ends when the last offset of each partition is read;
		// should one never come back (a record compaction removed behind
		// a transaction still open), everything before it is read and in
		// force by now, and the reader goes on with what follows.
		f.cfg.Logger.Warn("commands_not_all_loaded", "topic", f.cfg.Topics.Control(), "after", loadTimeout, "live", f.cmds.n.Load())
		return nil
	case <-ctx.Done():
		return fmt.Errorf("read %s: %w", f.cfg.Topics.Control(), context.Cause(ctx))
	}
}

// loadTimeout bounds how long kdelay waits at start for the control topic to
// be read to its end: a million commands take 2 s.
const loadTimeout = time.Minute

// releaseAfterLoading is how many commands loaded at start make it worth
// returning the memory used to read them: from 10,000, tens of megabytes.
const releaseAfterLoading = 10_000

// nudgeAll wakes every worker: a command fell due without matching, and the
// level workers look for its record (command_scan.go).
func (f *Forwarder) nudgeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.workers {
		w.nudge()
	}
}

// reportsUnmatched reports whether this process is the one that reports
// unmatched commands: the one whose ingress router owns partition 0.
func (f *Forwarder) reportsUnmatched() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.workers) > 0 && f.workers[0].ownsFirst.Load()
}

// Commands returns what this process's command reader saw so far.
func (f *Forwarder) Commands() CommandStats {
	if f.cmds == nil {
		return CommandStats{}
	}
	s := f.cmds.Stats()
	f.mu.Lock()
	for _, w := range f.workers {
		w.mu.Lock()
		s.Cancelled += w.stats.Cancelled
		w.mu.Unlock()
	}
	f.mu.Unlock()
	return s
}
