package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
)

// device sends heartbeats. Its first heartbeat sends its "offline" record,
// due timeout ahead; each later one reschedules that record timeout ahead.
// While it beats more often than timeout the record is never due. Once it
// stops, kdelay delivers the record timeout after its last heartbeat, and
// whoever reads target learns that it went offline. Neither this process nor
// kdelay keeps a timer per device: the pending record stays in Kafka, and a
// reschedule is one record on kdelay's compacted control topic, which keeps
// one entry per id however often the device beats.
type device struct {
	name    string
	id      string // kdelay-id of its offline record
	p       *client.Producer
	target  string        // topic the offline record is delivered to
	timeout time.Duration // how long after its last heartbeat it is offline
	sent    bool          // whether its offline record is sent
}

// newDevice returns a device starting a new session: its offline record has
// an id of its own, offline-<name>-<session>. The id must be new for each
// session because kdelay keeps a command for hours (the largest level plus
// retention-headroom) and applies it to every record with its id: a device
// that restarts must not have its new record governed by its last session's
// reschedule.
func newDevice(p *client.Producer, target, name string, timeout time.Duration) *device {
	session := make([]byte, 4)
	_, _ = rand.Read(session) // never fails since Go 1.24
	id := fmt.Sprintf("offline-%s-%s", name, hex.EncodeToString(session))
	return &device{name: name, id: id, p: p, target: target, timeout: timeout}
}

// beat is one heartbeat: it pushes the device's offline record to timeout
// from now, and returns once the broker has acknowledged that. kdelay never
// delivers the record before then.
func (d *device) beat(ctx context.Context) error {
	if d.sent {
		return d.p.Reschedule(ctx, d.id, client.After(d.timeout))
	}
	rec := &kgo.Record{Key: []byte(d.name), Value: []byte("offline")}
	if _, err := d.p.Send(ctx, d.target, rec, client.After(d.timeout), client.WithID(d.id)); err != nil {
		return fmt.Errorf("%s: send its offline record: %w", d.name, err)
	}
	d.sent = true
	return nil
}

// beatEvery beats now and then every interval until ctx ends or, if until
// is not zero, until then, calling onBeat with the time each acknowledged
// heartbeat was sent at. It returns nil when it stops so, or the error of a
// heartbeat that failed. A device that falls silent stops by until, not by
// a context of its own that ends: its devices share one client, and a
// record whose context ends may fail the other devices' records batched
// with it (TestRun failed so: "reschedule ... context deadline exceeded"
// for a device that kept beating).
func (d *device) beatEvery(ctx context.Context, interval time.Duration, until time.Time, onBeat func(at time.Time)) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		at := time.Now()
		if !until.IsZero() && !at.Before(until) {
			return nil
		}
		if err := d.beat(ctx); err != nil {
			if ctx.Err() != nil || pastDeadline(ctx) {
				return nil
			}
			return err
		}
		onBeat(at)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// pastDeadline reports whether ctx's deadline has passed: the client may
// give up on a write at the deadline a moment before ctx's own timer ends it.
func pastDeadline(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

// offline is a device reported offline: its offline record arrived.
type offline struct {
	device string
	id     string
	due    time.Time // when kdelay was to deliver it: the last heartbeat plus timeout
	at     time.Time // when it arrived
}

// watch reads offline records with cl, a client consuming their target
// topic, and calls report for each as it arrives, until ctx ends. It returns
// nil then, or the first error reading the topic.
func watch(ctx context.Context, cl *kgo.Client, report func(offline)) error {
	for {
		fetches := cl.PollFetches(ctx)
		at := time.Now()
		if ctx.Err() != nil {
			return nil
		}
		if err := fetches.Err(); err != nil {
			return fmt.Errorf("read offline records: %w", err)
		}
		for _, r := range fetches.Records() {
			id, _ := client.ID(r)
			// kdelay writes the due time it delivered for, the
			// rescheduled one, on every record it delivers.
			due, _ := kdelay.ParseDeliverAt(headerValue(r, kdelay.HeaderDeliverAt))
			report(offline{device: string(r.Key), id: id, due: due, at: at})
		}
	}
}

// headerValue is the value of r's first header called key, or "".
func headerValue(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
