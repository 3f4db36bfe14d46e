// Package client sends delayed records to kdelay and dedupes what it
// delivers, for Go programs using franz-go. Package kafkago does the same for
// segmentio/kafka-go.
//
// # Sending
//
// A Producer sends a record to be delivered to a target topic after a delay
// or at a time:
//
//	p, err := client.NewProducer(ctx, cl, client.ProducerConfig{})
//	id, err := p.Send(ctx, "reminders", &kgo.Record{Key: k, Value: v}, client.After(90*time.Second))
//	id, err = p.Send(ctx, "reminders", &kgo.Record{Key: k, Value: v}, client.At(t),
//		client.WithID("order-42"), client.WithHeaders(hs...))
//
// Send writes the record straight into the level topic that kdelay's ingress
// router would have chosen, which saves a hop and its latency, or into the
// ingress topic when less than the smallest level remains. Either way kdelay
// never delivers it before it is due, and delivers it to the target with its
// key, value and headers in order, plus kdelay-id and kdelay-deliver-at.
// After counts from this process's clock, as a record's timestamp would, and
// kdelay compares due times with its own clock: a skew between the two moves
// delivery by as much.
//
// Send checks the record it builds as kdelay will, with package kdelay's
// rules: a record kdelay would dead-letter (an invalid or own target, a delay
// beyond the maximum, an empty id) fails Send with kdelay's reason instead.
//
// To do that the Producer must know the server's topic prefix, levels and
// maximum delay: ProducerConfig's zero value matches a server run with its
// defaults, and other servers need the same values in ProducerConfig.
// NewProducer checks with the broker that the topics of that prefix and
// those levels, and its control topic, exist, and fails naming them
// otherwise; a Producer with fewer levels than the server works, its records
// taking more hops.
//
// # Commands
//
// Cancel, Reschedule and RunNow change a message still pending, named by its
// kdelay-id (the id Send returned): not delivered, delivered once at a new
// time, or delivered at once. Each writes a command to kdelay's control
// topic; the last one written for an id is in force. None can undo a
// delivery already made.
//
//	err = p.Reschedule(ctx, id, client.After(30*time.Second))
//
// Delayed builds a record for the ingress topic instead, for producing with
// any kgo.Client, with the same options and WithTopicPrefix for a server's
// prefix; any other producer, in any language, can set the headers
// documented in package kdelay.
//
// # Consuming
//
// Delivery is at-least-once: a consumer can see a record twice. Idempotent
// wraps a handler so that it runs once per kdelay-id, with a Store that
// remembers the ids handled; MemoryStore is one for a single process:
//
//	handle := client.Idempotent(client.NewMemoryStore(100_000, time.Hour), send)
//	fetches.EachRecord(func(r *kgo.Record) { err := handle(ctx, r); ... })
package client
