package forwarder

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// maxTableBytes is what the commands table may hold per live command,
// beside the id's own bytes (which the control record's key brings): a
// million live commands are then at most maxTableBytes MB, the figure
// docs/CANCEL.md and docs/BENCHMARKS.md give. A table entry of 32 bytes costs about
// 75 here, with the map's slots, control words and free room; a field of 16
// bytes more (a string) brings that to about 95, and fails.
const maxTableBytes = 85

// TestCommandsMemory holds the memory a live command costs: a process keeps
// every live command of the control topic, a million of them if users cancel
// that many, and a bigger entry is paid for a million times.
//
// Not parallel: the heap is the process's, and a test running beside this
// one would count in it.
func TestCommandsMemory(t *testing.T) {
	const n = 100_000
	ids := make([]string, n) // made before measuring: the id is not the table's
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	}
	at := time.Now().UnixMilli()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newCommands(time.Hour, nil)
	for i, id := range ids {
		c.set(id, command{name: cmdCancel, part: int32(i % 6), off: int64(i), at: at})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perEntry := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d live cancels: %.1f bytes each beside the id", n, perEntry)
	if perEntry > maxTableBytes {
		t.Errorf("a live command costs %.1f bytes beside its id, more than %d: a million would cost %.0f MB. Keep the table's entry (live) at 32 bytes; put what few commands have in a map of its own, as moved is",
			perEntry, maxTableBytes, perEntry)
	}
	runtime.KeepAlive(c)
	runtime.KeepAlive(ids)
}
