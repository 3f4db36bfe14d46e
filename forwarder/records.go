package forwarder

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// delivery is the record consumers read: the original key, value and user
// headers in their order, then kdelay-id and kdelay-deliver-at so they can
// dedupe and measure lateness. Leaving Partition unset lets the producer's
// key hashing place it, as with any keyed producer.
func (env envelope) delivery() *kgo.Record {
	return &kgo.Record{
		Topic: env.target,
		Key:   env.key,
		Value: env.value,
		Headers: append(clone(env.user),
			kgo.RecordHeader{Key: kdelay.HeaderID, Value: []byte(env.id)},
			kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: epochMillis(env.due)},
		),
	}
}

// hop is the record written to a level topic. Its timestamp is the time the
// level was chosen: the head is released at timestamp + level, and since the
// level was at most the time remaining then, that is never after the due
// time.
func (env envelope) hop(topic string, now time.Time) *kgo.Record {
	r := env.delivery()
	r.Topic = topic
	r.Timestamp = now
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: kdelay.HeaderTarget, Value: []byte(env.target)})
	return r
}

// deadLetter is the record put in the DLQ: the original key, value and every
// header unchanged, so it can be fixed and replayed, plus why and from where.
func deadLetter(topic string, src *kgo.Record, reason string) *kgo.Record {
	return &kgo.Record{
		Topic: topic,
		Key:   src.Key,
		Value: src.Value,
		Headers: append(clone(src.Headers),
			kgo.RecordHeader{Key: kdelay.HeaderError, Value: []byte(reason)},
			kgo.RecordHeader{Key: kdelay.HeaderSource, Value: []byte(source(src))},
		),
	}
}

func epochMillis(t time.Time) []byte { return strconv.AppendInt(nil, t.UnixMilli(), 10) }

func clone(hs []kgo.RecordHeader) []kgo.RecordHeader {
	return append(make([]kgo.RecordHeader, 0, len(hs)+3), hs...)
}
