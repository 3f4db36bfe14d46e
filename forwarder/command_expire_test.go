package forwarder

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestExpireInChunks: expire lets go of the lock between chunks, so that a
// million live commands do not hold forwarders up for tens of milliseconds a
// sweep; it must still forget exactly the commands past ttl, report exactly
// those unmatched, and keep what forwarders record meanwhile.
func TestExpireInChunks(t *testing.T) {
	t.Parallel()
	const n = 5 * sweepChunk
	now := time.Now()
	c := newCommands(time.Hour, nil)
	old, fresh := now.Add(-2*time.Hour).UnixMilli(), now.UnixMilli()
	for i := range n {
		at := fresh
		if i%2 == 0 {
			at = old
		}
		c.set(strconv.Itoa(i), command{name: cmdCancel, part: 0, off: int64(i), at: at})
	}
	// Forwarders match fresh commands while the sweep runs.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; i < n; i += 2 {
			id := strconv.Itoa(i)
			if cmd, ok := c.lookup(id); ok {
				c.matched(id, cmd, "")
			}
		}
	})
	unmatched := c.expire(now)
	wg.Wait()
	if len(unmatched) != n/2+n%2 {
		t.Errorf("expire reported %d unmatched, want the %d past ttl", len(unmatched), n/2+n%2)
	}
	for i := range n {
		cmd, ok := c.lookup(strconv.Itoa(i))
		switch {
		case i%2 == 0 && ok:
			t.Fatalf("command %d, past ttl, still in force", i)
		case i%2 == 1 && !ok:
			t.Fatalf("command %d, within ttl, forgotten", i)
		case i%2 == 1 && !cmd.matched:
			t.Fatalf("command %d lost its match, recorded during the sweep", i)
		}
	}
	if got := c.Stats().Live; got != n/2 {
		t.Errorf("%d live after the sweep, want %d", got, n/2)
	}
}
