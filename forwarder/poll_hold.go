package forwarder

import (
	"context"
	"sync"
	"time"
)

// pollHold lets the workers that share a client hold its next poll, rather
// than pause their sources, while a buffer is full of records on their way
// to the broker (throttle).
//
// The client fetches from a broker one request at a time, and sends the
// next as soon as a poll takes the last. A stage that pauses its
// partitions leaves them out of that next fetch; with the other stages'
// partitions idle, the broker holds the fetch for FetchMaxWait, and the
// stage, resumed a round trip later when its records are acknowledged,
// waits behind it. Over a million records all due, the ingress filled
// every 14,000 records or so and each refill waited 110 ms: 165,000
// records/s where the raw copy moved 500,000 (docs/BENCHMARKS.md).
//
// Not polling instead leaves the fetch the client sent after the last poll,
// with the stage's partitions in it, buffered in the client, and the client
// sends that broker nothing more until the next poll: memory is bounded as
// a pause bounds it, and once the acknowledgements make room the poll takes
// that fetch at once.
//
// A hold delays every other stage's records for as long as it lasts, so a
// poll waits limit at most: then every worker still holding it pauses its
// source instead (worker.expireHold), as it would with a client of its own.
type pollHold struct {
	limit time.Duration

	mu      sync.Mutex
	holders map[*worker]struct{}
	changed chan struct{} // a hold was released; capacity 1
}

// newPollHold returns a pollHold whose poll waits up to limit.
func newPollHold(limit time.Duration) *pollHold {
	return &pollHold{limit: limit, holders: map[*worker]struct{}{}, changed: make(chan struct{}, 1)}
}

// holdMax is how long a poll of the shared client waits for the workers
// that hold it: FetchMaxWait, beyond which a pause costs the stage less
// than the hold costs the others, and no more than a round trip to a broker
// on a loaded machine (pressedLead), which is when acknowledgements come.
func holdMax(cfg *Config) time.Duration { return min(cfg.FetchMaxWait, pressedLead) }

func (h *pollHold) hold(w *worker) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holders[w] = struct{}{}
}

func (h *pollHold) release(w *worker) {
	h.mu.Lock()
	_, held := h.holders[w]
	delete(h.holders, w)
	h.mu.Unlock()
	if held {
		select {
		case h.changed <- struct{}{}:
		default:
		}
	}
}

// wait returns once no worker holds the poll, after limit, or once ctx
// ends. After limit, each worker still holding it pauses its source
// instead. Only the poll loop calls it, outside the poll gate and with no
// worker's mu held: expireHold takes that mu.
func (h *pollHold) wait(ctx context.Context) {
	if h == nil || !h.held() {
		return
	}
	timer := time.NewTimer(h.limit)
	defer timer.Stop()
	for h.held() {
		select {
		case <-ctx.Done():
			return
		case <-h.changed:
		case <-timer.C:
			for _, w := range h.take() {
				w.expireHold()
			}
			return
		}
	}
}

func (h *pollHold) held() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.holders) > 0
}

// take removes every holder and returns them.
func (h *pollHold) take() []*worker {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := make([]*worker, 0, len(h.holders))
	for w := range h.holders {
		ws = append(ws, w)
		delete(h.holders, w)
	}
	return ws
}
