package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// faultFloor is a fault scenario's floor: for every record the scenario
// writes, a timer that fires at the record's due time and one produce, by a
// plain client of its own (franz-go's defaults: acks=all, idempotent,
// unbounded retries; no linger, as kdelay's producer), to a topic of the
// scenario's with the broker's default replication and the target's
// partitions, read as the target is. It runs for the whole scenario, so
// each fault reaches it as it reaches kdelay: what kdelay's lateness has
// above the floor's is what kdelay adds to Kafka's own recovery from the
// fault (a leader election, a coordinator moving).
type faultFloor struct {
	cl       *kgo.Client
	s        *sender
	coll     *collector
	stopColl func()
	first    int // id of the first twin, after the warm-up
}

// startFloor creates the floor's topic, starts reading it, and warms its
// producer up, so that its first twin pays no metadata request or
// connection that kdelay's first delivery, long warmed up, does not.
func (r *faultRun) startFloor(ctx context.Context) error {
	topic := r.name + ".floor"
	if err := r.c.createTopics(ctx, topic); err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.c.brokers...), kgo.ProducerLinger(0)}, r.c.opts...)...)
	if err != nil {
		return fmt.Errorf("connect the floor's producer: %w", err)
	}
	f := &faultFloor{cl: cl}
	r.floor = f // teardown closes it from here on
	cctx, cancel := context.WithCancel(ctx)
	coll, err := r.c.collect(cctx, topic, true, r.cfg.collectorOpts()...)
	if err != nil {
		cancel()
		return err
	}
	f.coll, f.stopColl = coll, func() { cancel(); <-coll.done }
	f.s = &sender{cl: cl, target: topic, coll: coll, log: r.cfg.Logger}
	if err := f.warmUp(ctx, r.cfg.Partitions); err != nil {
		return err
	}
	f.first = coll.nextID()
	return nil
}

// warmUp sends a few twins due now, keyed to reach every partition's
// leader, and waits until they arrived.
func (f *faultFloor) warmUp(ctx context.Context, partitions int32) error {
	g := newLateness("floor warm-up")
	now := time.Now().Truncate(time.Millisecond)
	for range 4 * partitions {
		f.s.floorAt(f.coll.expect(g), now, nil)
	}
	if err := f.coll.wait(ctx, time.Now().Add(30*time.Second)); err != nil {
		return err
	}
	if sent, delivered := f.coll.of(g); delivered < sent {
		return fmt.Errorf("%d of %d of the floor's warm-up records arrived at %s within 30s", delivered, sent, f.s.target)
	}
	return nil
}

// twin schedules the floor's twin of a record due at due.
func (f *faultFloor) twin(due time.Time) {
	id := f.coll.expect()
	f.coll.scheduled(id, due)
	f.s.sent.Add(1)
	f.s.floorAt(id, due, func() { f.coll.refused(id) })
}

// wait returns once every twin the broker took has arrived, at the
// deadline, or when ctx ends.
func (f *faultFloor) wait(ctx context.Context, deadline time.Time) error {
	return f.coll.waitFor(ctx, deadline, f.coll.settled)
}

// traced is the trace of every twin.
func (f *faultFloor) traced() []traced { return f.coll.traced(f.first, f.coll.nextID()) }

// stop cancels the twins not yet due, waits (bounded by ctx) for those in
// flight, stops reading and closes the producer.
func (f *faultFloor) stop(ctx context.Context) {
	if f.s != nil {
		f.s.stop(ctx)
	}
	if f.stopColl != nil {
		f.stopColl()
	}
	f.cl.Close()
}
