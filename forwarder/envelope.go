package forwarder

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// envelope is a record's route, checked once by kdelay.Parse (the wire
// contract's one parser), with what travels with it: its key, value and the
// user's own headers, untouched and in order.
type envelope struct {
	kdelay.Route
	key, value []byte
	user       []kgo.RecordHeader // every header but the routing ones
}

// parse reads r's route. A record that came without a kdelay-id gets its
// source as id, so replaying the same record keeps its id.
func parse(r *kgo.Record, rules kdelay.Rules) (envelope, error) {
	rt, user, err := kdelay.Parse(r.Timestamp, r.Headers, rules)
	if err != nil {
		return envelope{}, err
	}
	if rt.ID == "" {
		rt.ID = source(r)
	}
	return envelope{Route: rt, key: r.Key, value: r.Value, user: user}, nil
}

// delivery makes r the record consumers read: the original key, value and
// user headers in their order, then kdelay-id and kdelay-deliver-at so they
// can dedupe and measure lateness. Leaving Partition unset lets the
// producer's key hashing place it, as with any keyed producer. An envelope
// makes one record, delivery or hop: both append to its headers.
func (env envelope) delivery(r *kgo.Record) *kgo.Record {
	*r = kgo.Record{
		Topic:   env.Target,
		Key:     env.key,
		Value:   env.value,
		Headers: kdelay.AppendDelivered(env.user, env.ID, env.Due),
	}
	return r
}

// hop makes r the record written to a level topic. Its timestamp is the time
// the level was chosen: the head is released at timestamp + level, and since
// the level was at most the time remaining then, that is never after the due
// time.
func (env envelope) hop(r *kgo.Record, topic string, now time.Time) *kgo.Record {
	*r = kgo.Record{
		Topic:     topic,
		Key:       env.key,
		Value:     env.value,
		Timestamp: now,
		Headers:   kdelay.AppendHop(env.user, env.Target, env.ID, env.Due),
	}
	return r
}

// source is the record's place in Kafka, topic/partition/offset.
func source(r *kgo.Record) string { return kdelay.Source(r.Topic, r.Partition, r.Offset) }
