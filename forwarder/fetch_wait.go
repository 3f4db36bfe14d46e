package forwarder

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchWait sets how long a broker holds a fetch of the shared client that
// finds nothing new: Config.FetchMaxWait while a fetch may soon be needed at
// once, Config.IdleFetchMaxWait otherwise.
//
// The client fetches from a broker one request at a time. A partition
// resumed while a fetch is in flight is fetched once that fetch ends, and a
// read-back (ReaderClient.Request) waits behind it on the connection: a
// refill of a full buffer or a read-back waits up to the fetch's wait. So
// the wait is short while anything may pause and resume. But an idle process
// then sends a fetch a broker per FetchMaxWait for nothing: on three brokers
// at 100ms, 1.4% of a core; at 5s, 0.27% (docs/BENCHMARKS.md, "Idle CPU").
//
// A fetch keeps the wait it was sent with (third_party/franz-go), so the
// wait turns short ahead of the need, not at it: each party says from when
// it needs prompt fetches (need), and the wait is short from
// IdleFetchMaxWait plus pressedLead (a round trip) before the earliest. The
// fetch the client sends after one that brought records goes out as they are
// polled, before any worker looked at them, so the wait stays short for
// busyFor after records were fetched (busy): a worker they fill, or a
// schedule they bring, has said what it needs by then. Partitions the group
// assigns join the fetch only once the one in flight ends, so an assignment,
// and the client's start, make the wait short likewise: with a long fetch in
// flight, the partitions a process took over in a rolling restart on the
// 3-node cluster waited for it, and every record due in that second came
// 5.5s late (docs/RELIABILITY.md, "A rolling restart and the idle wait").
// What is left: partitions assigned to a process idle for longer than
// busyFor, with no round before, wait for the fetch in flight, up to
// IdleFetchMaxWait; ending that fetch would take the client's help.
type fetchWait struct {
	short, long time.Duration
	now         func() time.Time

	// active is when the client was last busy, in Unix nanoseconds; isLong
	// says the client's wait is long now, so that busy, which runs for
	// every batch fetched, takes the lock only to shorten it.
	active atomic.Int64
	isLong atomic.Bool

	mu     sync.Mutex
	cl     *kgo.Client
	needs  map[any]time.Time // from when each party needs prompt fetches
	timer  *time.Timer       // runs apply when the wait must next change
	next   time.Time         // when timer runs; the zero time if stopped
	closed bool
}

// atOnce is a need that has come: the same time at every call, so that a
// worker that stays full tells the wait nothing new cycle after cycle.
var atOnce = time.Unix(0, 0)

// newFetchWait returns the wait of a client whose fetches wait short while
// one is needed soon, long otherwise. Its client starts with short
// (clientOpts); start hands it over.
func newFetchWait(cfg *Config) *fetchWait {
	return &fetchWait{short: cfg.FetchMaxWait, long: cfg.IdleFetchMaxWait, now: cfg.NowFunc, needs: map[any]time.Time{}}
}

// start sets the wait of cl from now on; with IdleFetchMaxWait no longer
// than FetchMaxWait, it leaves the client's alone.
func (f *fetchWait) start(cl *kgo.Client) {
	if f == nil || f.short >= f.long {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cl = cl
	f.active.Store(f.now().UnixNano())
	f.apply()
}

// stop ends the changes, when the client closes.
func (f *fetchWait) stop() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.timer != nil {
		f.timer.Stop()
	}
}

// need says that who needs prompt fetches from at on (now or earlier: at
// once), or no longer needs them (the zero time).
func (f *fetchWait) need(who any, at time.Time) {
	if f == nil || f.short >= f.long {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.needs[who].Equal(at) {
		return
	}
	if at.IsZero() {
		delete(f.needs, who)
	} else {
		f.needs[who] = at
	}
	f.apply()
}

// busyFor is how long the wait stays short after the client was busy. A
// worker that records fetched reach has said what it needs within a
// pressedLead; a cooperative rebalance assigns in two rounds, the second
// once the members that gave partitions up have rejoined, a second or so
// on the 3-node cluster.
const busyFor = 2 * time.Second

// busy notes that a fetch brought records or the group moved partitions.
// f may be nil: a stage's own client has no fetchWait.
func (f *fetchWait) busy() {
	if f == nil {
		return
	}
	f.active.Store(f.now().UnixNano())
	if f.isLong.Load() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.apply()
	}
}

// apply sets the client's wait for now, and the timer for when it must
// change next. mu must be held.
func (f *fetchWait) apply() {
	if f.cl == nil || f.closed {
		return
	}
	now := f.now()
	var soonest time.Time
	for _, at := range f.needs {
		soonest = earliest(soonest, at)
	}
	quiet := time.Unix(0, f.active.Load()).Add(busyFor)
	ahead := now.Add(f.long + pressedLead)
	wait, next := f.long, time.Time{}
	switch {
	case now.Before(quiet):
		wait, next = f.short, quiet
	case !soonest.IsZero() && !soonest.After(ahead):
		wait = f.short // until a need changes
	case !soonest.IsZero():
		next = soonest.Add(-f.long - pressedLead)
	}
	if long := wait == f.long; long != f.isLong.Load() {
		f.cl.UpdateFetchMaxWait(wait)
		f.isLong.Store(long)
	}
	if next.Equal(f.next) {
		return
	}
	f.next = next
	switch {
	case next.IsZero():
		f.timer.Stop()
	case f.timer == nil:
		f.timer = time.AfterFunc(next.Sub(now), f.fire)
	default:
		f.timer.Reset(next.Sub(now))
	}
}

// fire is the timer's: the time it was set for has come.
func (f *fetchWait) fire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = time.Time{}
	f.apply()
}

// fetchHook tells a fetchWait of every batch its client fetches.
type fetchHook struct{ f *fetchWait }

func (h fetchHook) OnFetchBatchRead(kgo.BrokerMetadata, string, int32, kgo.FetchBatchMetrics) {
	h.f.busy()
}
