package bench

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// valueSize is the size of every record's value, in bytes.
const valueSize = 100

// randomValue is a record's value: random bytes, which no batch compression
// shrinks, so that a fetch of so many bytes holds as many records as it
// would of real data, not a hundred times more.
func randomValue() []byte {
	b := make([]byte, valueSize)
	_, _ = rand.Read(b) // never fails
	return b
}

// sender writes the benchmark's records: to kdelay's ingress, or, for the
// floor, straight to the target when due.
type sender struct {
	cl      *kgo.Client // ProducerLinger(0), as the forwarder's
	ingress string
	target  string
	coll    *collector
	log     *slog.Logger

	sent   atomic.Int64 // records handed to the client
	failed atomic.Int64 // records the broker did not take

	mu     sync.Mutex
	timers []*time.Timer  // floor records not yet due
	pids   map[int64]bool // the producer ids the broker gave this sender's client
}

// steady sends each record at its time. It returns once all are sent; the
// floor's timers fire later, until stop.
func (s *sender) steady(ctx context.Context, sends []send) error {
	start := time.Now()
	for _, sd := range sends {
		if err := sleepUntil(ctx, start.Add(sd.at)); err != nil {
			return err
		}
		s.one(sd)
	}
	return nil
}

// one sends a record now, due sd.delay from its timestamp. The timestamp is
// whole milliseconds, as Kafka keeps it, so that kdelay plans from exactly
// the time the benchmark does.
func (s *sender) one(sd send) {
	ts := time.Now().Truncate(time.Millisecond)
	due := ts.Add(sd.delay)
	id := s.coll.expect(sd.groups...)
	s.sent.Add(1)
	if !sd.floor {
		s.produce(delayedRecord(s.ingress, s.target, id, ts, due))
		return
	}
	s.floorAt(id, due, nil)
}

// floorAt produces the record id straight to the target when it is due:
// the floor, what a plain timer and one produce achieve on this machine and
// broker, read by the same consumer. refused, unless nil, is called if the
// broker does not take it.
func (s *sender) floorAt(id []byte, due time.Time, refused func()) {
	r := targetRecord(s.target, id, due)
	t := time.AfterFunc(time.Until(due), func() {
		r.Timestamp = time.Now()
		s.produceOr(context.Background(), r, refused)
	})
	s.mu.Lock()
	s.timers = append(s.timers, t)
	s.mu.Unlock()
}

// burst sends n records all due at the same millisecond, lead after the
// first is sent, as fast as the client takes them, and returns the due time
// and when the last was acknowledged.
func (s *sender) burst(ctx context.Context, n int, lead time.Duration, g *lateness) (due, written time.Time, err error) {
	due = time.Now().Add(lead).Truncate(time.Millisecond)
	err = s.bulk(ctx, n, func() *kgo.Record {
		return delayedRecord(s.ingress, s.target, s.coll.expect(g), time.Now().Truncate(time.Millisecond), due)
	})
	return due, time.Now(), err
}

// bulk produces n records made by next as fast as the client takes them,
// and returns once the broker acknowledged them all.
func (s *sender) bulk(ctx context.Context, n int, next func() *kgo.Record) error {
	for range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.sent.Add(1)
		s.produce(next())
	}
	return s.cl.Flush(ctx)
}

func (s *sender) produce(r *kgo.Record) { s.produceOr(context.Background(), r, nil) }

// produceOr produces rec, calling refused, unless nil, if the broker does
// not take it.
func (s *sender) produceOr(ctx context.Context, rec *kgo.Record, refused func()) {
	s.cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
		s.notePID(rec.ProducerID)
		if err == nil {
			return
		}
		if refused != nil {
			refused()
		}
		if s.failed.Add(1) == 1 {
			s.log.Warn("send_failed", "topic", rec.Topic, "err", err)
		}
	})
}

// notePID keeps pid, the producer id a record of this sender was written
// with (-1 when it failed: franz-go does not say which).
func (s *sender) notePID(pid int64) {
	if pid < 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.pids[pid] {
		if s.pids == nil {
			s.pids = map[int64]bool{}
		}
		s.pids[pid] = true
	}
}

// wrote reports whether a record with producer id pid may be one this
// sender wrote, rather than one kdelay wrote to the same topic (a held
// record handed back to the ingress, forwarder/rebalance_handback.go).
func (s *sender) wrote(pid int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pids[pid]
}

// stop cancels the floor records not yet due and waits for what is in
// flight.
func (s *sender) stop(ctx context.Context) {
	s.mu.Lock()
	for _, t := range s.timers {
		t.Stop()
	}
	s.timers = nil
	s.mu.Unlock()
	_ = s.cl.Flush(ctx)
}

// delayedRecord is a record as a producer writes it to kdelay's ingress,
// or kdelay's client library to a level topic: a target, an absolute due
// time and an id the benchmark looks up on arrival.
func delayedRecord(topic, target string, id []byte, ts, due time.Time) *kgo.Record {
	return &kgo.Record{
		Topic:     topic,
		Key:       id,
		Value:     randomValue(),
		Timestamp: ts,
		Headers:   kdelay.AppendHop([]kgo.RecordHeader(nil), target, string(id), due),
	}
}

// targetRecord is a record as kdelay delivers it, for the floor.
func targetRecord(target string, id []byte, due time.Time) *kgo.Record {
	return &kgo.Record{Topic: target, Key: id, Value: randomValue(), Headers: kdelay.AppendDelivered([]kgo.RecordHeader(nil), string(id), due)}
}

// sleepUntil waits until t or the end of ctx.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
