package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"
)

// max-buffered-bytes covers the scheduler's index as well as the records
// (forwarder.Config.SharedBytes): the forwarder's records get what the
// index leaves, so the soft memory limit, 3/2 of max-buffered-bytes, holds
// both. Records keep a least share however large the index grows
// (Forwarder.RecordBudget), and beyond that the two together pass
// max-buffered-bytes: with the limit left where it was, what is live would
// come near it and the collector would run without end. So the limit
// follows the index then, and a warning says what to change once the
// records have less than half the budget.

// indexCheckInterval is how often the index is compared with the budget.
// It grows by a page of slots at a time while a partition loads, far
// slower than a limit checked this often could miss.
const indexCheckInterval = 10 * time.Second

// indexWatch keeps the soft memory limit above the scheduler's index and
// the forwarder's records, and warns once when the index takes more than
// half of max-buffered-bytes.
type indexWatch struct {
	budget  int64        // max-buffered-bytes
	index   func() int64 // the scheduler's IndexBytes
	records func() int64 // the forwarder's RecordBudget
	log     *slog.Logger
	limit   int64 // the soft memory limit serve set (setMemoryLimit); 0 if not its own, which it leaves
	warned  bool
}

// run checks the index every indexCheckInterval until ctx ends.
func (w *indexWatch) run(ctx context.Context) {
	t := time.NewTicker(indexCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.check()
		}
	}
}

// check raises the limit if the index and the records' least share have
// outgrown max-buffered-bytes, and warns once when the records have less
// than half of it.
func (w *indexWatch) check() {
	index, records := w.index(), w.records()
	if w.limit > 0 {
		if limit := max(w.budget, index+records) * 3 / 2; limit > w.limit {
			debug.SetMemoryLimit(limit)
			w.limit = limit
			w.log.Info("memory_limit", "source", "max-buffered-bytes and the schedules' index", "bytes", limit)
		}
	}
	if !w.warned && records < w.budget/2 {
		w.warned = true
		w.log.Warn("schedules_index_large", "index_bytes", index, "max_buffered_bytes", w.budget, "record_bytes", records,
			"fix", "the scheduler's index leaves the forwarder less than half of max-buffered-bytes for records, "+
				"which slows it under a high rate: raise max-buffered-bytes (and the container's memory), "+
				"or spread the schedules over more processes (docs/SCHEDULES.md, Memory)")
	}
}
