package forwarder

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// TestHeldRecordsLetTheirFetchGo holds one remainder out of a fetch and
// drops the rest, as a level does with records hopped or delivered: the
// memory the fetch was decoded into must be collectable while the remainder
// waits. The client decodes a fetch's records as slices of one buffer (a
// decompressed batch, or the response itself) and one slab of kgo.Records;
// a record held by pointer kept both, a batch for every remainder, while
// the buffer counted only the record's own bytes: at 20,000 records/s the
// live heap of kdelay serve was three times what its buffers counted.
func TestHeldRecordsLetTheirFetchGo(t *testing.T) {
	t.Parallel()
	now := time.Now()
	w, p := ingressAt(t, now)

	collected := make(chan struct{})
	p.enqueue(fetchOf(t, now, 100, collected))
	e := p.take()
	w.route(e, now, now)
	if len(w.held) != 1 {
		t.Fatalf("%d records held, want the remainder due in 500ms", len(w.held))
	}
	clear(p.queue) // the rest of the fetch was handed on
	p.queue = nil

	deadline := time.After(5 * time.Second)
	for {
		runtime.GC()
		select {
		case <-collected:
			if got := string(w.held.top().out.Value); got != "value 0" {
				t.Errorf("the held record's value is %q, want %q", got, "value 0")
			}
			if got := string(w.held.top().src.Value); got != "value 0" {
				t.Errorf("the held record's source value is %q, want %q", got, "value 0")
			}
			return
		case <-deadline:
			t.Fatal("the fetch's buffer was not collected within 5s while one of its records was held: a remainder keeps its whole fetch in memory")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestHeldRecordIsCopiedOnce checks what holding a remainder costs: its
// source gets bytes of its own, and the record it will produce shares them
// and stays in its entry rather than being copied too: every record waits
// as a remainder once, so what one costs, each costs.
func TestHeldRecordIsCopiedOnce(t *testing.T) {
	now := time.Now()
	w, p := ingressAt(t, now)
	p.enqueue(fetchOf(t, now, 1, make(chan struct{})))
	w.route(p.take(), now, now)
	e := w.held.top()

	if e.out != &e.rec {
		t.Errorf("the held record is not its entry's own: a copy beside the entry")
	}
	if &e.out.Value[0] != &e.src.Value[0] {
		t.Errorf("the held record's value is a copy of its source's, not the same bytes")
	}
	// Three for the source (record, headers, bytes), one for the bytes of
	// the headers kdelay added to the record it will produce.
	if n := testing.AllocsPerRun(100, e.own); n > 4 {
		t.Errorf("holding a record allocates %v times, want at most 4", n)
	}
	if got := string(e.out.Value); got != "value 0" {
		t.Errorf("the held record's value is %q, want %q", got, "value 0")
	}
}

// ingressAt is an ingress worker with levels of 1s and 5s whose clock
// stands at now, and its partition 0.
func ingressAt(t *testing.T, now time.Time) (*worker, *partition) {
	t.Helper()
	cfg := Config{
		Levels:  mustParse(t, "1s", "5s"),
		Topics:  kdelay.Topics{Prefix: "kdelay"},
		NowFunc: func() time.Time { return now },
	}
	w := &worker{cfg: &cfg, level: IngressLevel, obs: nopObserver{}, rules: kdelay.Rules{Topics: cfg.Topics}, parts: map[int32]*partition{}}
	p := newPartition(0, 0)
	w.parts[0] = p
	return w, p
}

// fetchOf makes n records as the client decodes a fetch: one slab of
// records whose values and header values are slices of one buffer. The first
// is due in 500ms, below the smallest level; collected is closed once the
// buffer is garbage.
func fetchOf(t *testing.T, now time.Time, n int, collected chan struct{}) []*kgo.Record {
	t.Helper()
	buf := make([]byte, 0, 64<<10)
	slab := make([]kgo.Record, n)
	rs := make([]*kgo.Record, n)
	due := strconv.FormatInt(now.Add(500*time.Millisecond).UnixMilli(), 10)
	for i := range slab {
		value := len(buf)
		buf = append(buf, "value "+strconv.Itoa(i)...)
		target := len(buf)
		buf = append(buf, "orders"...)
		at := len(buf)
		buf = append(buf, due...)
		slab[i] = kgo.Record{
			Topic: "kdelay.ingress", Offset: int64(i), Timestamp: now,
			Value: buf[value:target:target],
			Headers: []kgo.RecordHeader{
				{Key: kdelay.HeaderTarget, Value: buf[target:at:at]},
				{Key: kdelay.HeaderDeliverAt, Value: buf[at:len(buf):len(buf)]},
			},
		}
		rs[i] = &slab[i]
	}
	runtime.AddCleanup(&buf[:1][0], func(ch chan struct{}) { close(ch) }, collected)
	return rs
}
