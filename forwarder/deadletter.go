package forwarder

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// deadLetter puts e in the DLQ with reason. The DLQ is written like any
// other topic, so a failed dead letter is retried and never blocks the
// records behind it from being routed.
func (w *worker) deadLetter(e *entry, reason string) {
	w.log.Warn("dead_letter", "source", source(e.src), "reason", reason)
	e.out = deadLetterRecord(w.cfg.Topics.DLQ(), e.src, reason)
	e.dead = true
	e.attempts = 0
	w.stats.DeadLettered++
	w.produce(e)
}

// deadLetterRecord is the record put in the DLQ: the original key, value and
// every header unchanged, so it can be fixed and replayed, plus why and from
// where.
func deadLetterRecord(topic string, src *kgo.Record, reason string) *kgo.Record {
	hs := make([]kgo.RecordHeader, 0, len(src.Headers)+2)
	return &kgo.Record{
		Topic: topic,
		Key:   src.Key,
		Value: src.Value,
		Headers: append(append(hs, src.Headers...),
			kgo.RecordHeader{Key: kdelay.HeaderError, Value: []byte(reason)},
			kgo.RecordHeader{Key: kdelay.HeaderSource, Value: []byte(source(src))},
		),
	}
}
