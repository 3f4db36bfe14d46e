package forwarder

import (
	"context"
	"sync"
)

// pollGate keeps a client's poll apart from what must not run beside it.
// franz-go: "It is invalid to call PollFetches concurrently with Begin or
// End" (GroupTransactSession, txn.go). End reads the offsets polled so far
// and sets the client's offsets after the commit or abort; a poll between
// the two would hand on records from offsets the abort then rewinds, or
// move the offsets End commits.
//
// The poll loop polls inside the gate (enter); the transaction loop closes
// it (hold) around End, Begin and the rewinds (txn_loop.go). The poll
// waits for records with no deadline, so hold cancels the wait rather than
// sit behind it: the loop then hands on nothing, allows a rebalance, leaves
// the gate, and waits at enter until the holder is done. Go's RWMutex lets
// no new reader in once a writer waits, so the loop cannot starve End.
//
// Neither side may hold worker.mu while it waits here: the loop takes mu in
// take, inside the gate, and a rebalance callback, which the loop's poll
// waits for, takes it too.
type pollGate struct {
	rw sync.RWMutex

	mu      sync.Mutex
	holding int                // holders waiting for the gate or in it
	cancel  context.CancelFunc // the poll in the gate; nil between polls
}

// enter lets the poll loop in, once no one holds the gate, and returns the
// context to poll with: cancelled with ctx or when someone wants to hold the
// gate. leave must be called once the poll's records are handed on.
func (g *pollGate) enter(ctx context.Context) (pctx context.Context, leave func()) {
	g.rw.RLock()
	pctx, cancel := context.WithCancel(ctx)
	g.mu.Lock()
	if g.holding > 0 {
		cancel() // a holder came between RLock and here: no wait for records
	}
	g.cancel = cancel
	g.mu.Unlock()
	return pctx, func() {
		g.mu.Lock()
		g.cancel = nil
		g.mu.Unlock()
		cancel()
		g.rw.RUnlock()
	}
}

// hold waits until no poll is in the gate, ending the wait of the one in it,
// and keeps the loop out until release.
func (g *pollGate) hold() (release func()) {
	g.mu.Lock()
	g.holding++
	if g.cancel != nil {
		g.cancel()
	}
	g.mu.Unlock()
	g.rw.Lock()
	return func() {
		g.mu.Lock()
		g.holding--
		g.mu.Unlock()
		g.rw.Unlock()
	}
}
