package main

import (
	"bytes"
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// TestIndexWatch checks what serve does as the scheduler's index grows
// against max-buffered-bytes, which covers it: nothing while the records'
// share shrinks, since the soft memory limit still holds both; a warning,
// once, that names the fix when the records have less than half; and a
// higher limit once the index and the records' least share outgrow the
// budget, so that the collector does not run without end. A limit that is
// not serve's own (GOMEMLIMIT) is left as it is.
func TestIndexWatch(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	const (
		mib    = int64(1) << 20
		budget = 64 * mib
		least  = 19 * mib / 4 // 256 KiB for each of 19 forwarders
	)
	var index int64
	var logs bytes.Buffer
	watch := func(limit int64) *indexWatch {
		logs.Reset()
		return &indexWatch{budget: budget, limit: limit, log: slog.New(slog.NewTextHandler(&logs, nil)),
			index: func() int64 { return index }, records: func() int64 { return max(budget-index, least) }}
	}

	w := watch(budget * 3 / 2)
	debug.SetMemoryLimit(w.limit)
	for _, step := range []struct {
		index, limit int64
		warnings     int
	}{
		{10 * mib, 96 * mib, 0},
		{31 * mib, 96 * mib, 0},
		{40 * mib, 96 * mib, 1},                 // records 24 MiB: less than half
		{59 * mib, 96 * mib, 1},                 // with the records' least share, still within the budget
		{70 * mib, 3 * (70*mib + least) / 2, 1}, // past it: the limit follows
		{50 * mib, 3 * (70*mib + least) / 2, 1}, // never lowered: what was allocated may still be live
	} {
		index = step.index
		w.check()
		if got := debug.SetMemoryLimit(-1); got != step.limit {
			t.Errorf("index %d MiB: memory limit %d, want %d", step.index/mib, got, step.limit)
		}
		if got := strings.Count(logs.String(), "schedules_index_large"); got != step.warnings {
			t.Errorf("index %d MiB: %d warnings, want %d:\n%s", step.index/mib, got, step.warnings, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "raise max-buffered-bytes") {
		t.Errorf("the warning does not say what to change:\n%s", logs.String())
	}

	t.Run("GOMEMLIMIT's limit is kept", func(t *testing.T) {
		set := 300 * mib
		debug.SetMemoryLimit(set)
		w := watch(0)
		index = 200 * mib
		w.check()
		if got := debug.SetMemoryLimit(-1); got != set {
			t.Errorf("memory limit %d with GOMEMLIMIT's %d, want it kept", got, set)
		}
	})
}
