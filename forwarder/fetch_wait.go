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
// pressedLead after records were fetched (busy): a worker they fill, or a
// schedule they bring, has said what it needs by then.
//
// A need that comes sooner than that lead, and partitions the group
// assigns, would wait for the long fetch in flight to their broker: the
// wait turns short and ends such fetches (apply's cut; the client's
// EndFetchesLongerThan, third_party/franz-go). Without it, in a rolling
// restart on the 3-node cluster, the partitions a process took in a
// rebalance's second round waited for the fetch of its first, and every
// record due in that second came 5.5s late (docs/RELIABILITY.md, "A rolling
// restart and the idle wait").
type fetchWait struct {
	short, long time.Duration
	now         func() time.Time

	// active is when the client was last busy, in Unix nanoseconds; isLong
	// says the client's wait is long now, so that busy, which runs for
	// every batch fetched, takes the lock only to shorten it.
	active atomic.Int64
	isLong atomic.Bool

	mu      sync.Mutex
	cl      *kgo.Client
	needs   map[any]time.Time // from when each party needs prompt fetches
	shortAt time.Time         // when the wait last turned short
	timer   *time.Timer       // runs apply when the wait must next change
	next    time.Time         // when timer runs; the zero time if stopped
	closed  bool
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
// than FetchMaxWait, it leaves the client's alone (see assigned).
func (f *fetchWait) start(cl *kgo.Client) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cl = cl
	if f.short < f.long {
		f.apply(false)
	}
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
	f.apply(true)
}

// busy notes that a fetch brought records.
func (f *fetchWait) busy() {
	f.active.Store(f.now().UnixNano())
	if f.isLong.Load() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.apply(false)
	}
}

// assigned notes that the group assigned partitions, and again that their
// offsets came: the client fetches them from then on, once its fetch in
// flight to their broker ends, and a long one ends at once. Both, because the
// offsets can come after the short spell the assignment started: in
// exactly-once they wait for the last owner's transaction to end. f may be
// nil: a stage's own client has no fetchWait.
func (f *fetchWait) assigned() {
	if f == nil {
		return
	}
	if f.short >= f.long {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.assignedFixed()
		return
	}
	f.active.Store(f.now().UnixNano())
	f.mu.Lock()
	defer f.mu.Unlock()
	f.apply(true)
}

// assignedFixed is assigned when the wait never changes (IdleFetchMaxWait no
// longer than FetchMaxWait): a FetchMaxWait longer than the default would
// hold the partitions assigned for as long. Fetches wait the default for
// pressedLead instead, and the longer ones in flight end; the partitions join
// the fetches within that spell. mu must be held.
func (f *fetchWait) assignedFixed() {
	if f.cl == nil || f.closed || f.short <= DefaultFetchMaxWait {
		return
	}
	f.cl.UpdateFetchMaxWait(DefaultFetchMaxWait)
	f.cl.EndFetchesLongerThan(DefaultFetchMaxWait)
	if f.timer == nil {
		f.timer = time.AfterFunc(pressedLead, f.restore)
	} else {
		f.timer.Reset(pressedLead)
	}
}

// restore is assignedFixed's timer: fetches wait FetchMaxWait again.
func (f *fetchWait) restore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.cl.UpdateFetchMaxWait(f.short)
	}
}

// apply sets the client's wait for now, and the timer for when it must
// change next; with cut, a short wait ends the long fetches in flight too:
// a need that came sooner than the lead, or partitions assigned, would wait
// for them. A need the timer turns short for (fire) needs no cut: the long
// fetch in flight ends a pressedLead before it. mu must be held.
func (f *fetchWait) apply(cut bool) {
	if f.cl == nil || f.closed {
		return
	}
	now := f.now()
	var soonest time.Time
	for _, at := range f.needs {
		soonest = earliest(soonest, at)
	}
	quiet := time.Unix(0, f.active.Load()).Add(pressedLead)
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
		if !long {
			f.shortAt = now
		}
	}
	// A fetch sent long ends within the long wait of the turn to short:
	// no need can find one later, and a worker's cycle need not look.
	if cut && wait == f.short && now.Before(f.shortAt.Add(f.long)) {
		f.cl.EndFetchesLongerThan(wait)
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
	f.apply(false)
}

// fetchHook tells a fetchWait of every batch its client fetches.
type fetchHook struct{ f *fetchWait }

func (h fetchHook) OnFetchBatchRead(kgo.BrokerMetadata, string, int32, kgo.FetchBatchMetrics) {
	h.f.busy()
}
