package forwarder

import (
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// What a record costs on the wire beyond its key, value and header bytes,
// with room to spare, so that a dead letter cut to a topic's
// max.message.bytes is not refused for a few bytes: a batch of one record
// adds a 61-byte batch header and the record's own fields and length
// prefixes; each header adds two length prefixes.
const (
	batchOverhead  = 256
	headerOverhead = 10
)

// truncatedRoom is what a HeaderTruncated header can take: its name and
// three parts of two ten-digit numbers.
var truncatedRoom = headerOverhead + len(kdelay.HeaderTruncated) + 3*len("headers=1234567890/1234567890,")

// deadLetter puts e in the DLQ with reason. The DLQ is written like any
// other topic, so a failed dead letter is retried and never blocks the
// records behind it from being routed.
func (w *worker) deadLetter(e *entry, reason string) {
	e.out = deadLetterRecord(w.cfg.Topics.DLQ(), e.src, reason, w.dlqMax)
	attrs := []any{"source", source(e.src), "reason", reason}
	if cut := headerValue(e.out, kdelay.HeaderTruncated); cut != "" {
		attrs = append(attrs, "truncated", cut)
	}
	w.log.Warn("dead_letter", attrs...)
	e.dead = true
	e.due = time.Time{} // not a delivery: no lateness to report
	e.attempts = 0
	w.count(DeadLettered)
	w.produce(e)
}

// shrink halves a dead letter the broker refused as too large, and reports
// whether it could: the DLQ's limit read at start was wrong (its
// max.message.bytes was lowered since, or could not be read).
func (w *worker) shrink(e *entry) bool {
	size := recordBytes(e.out.Key, e.out.Value, e.out.Headers) + batchOverhead
	out := deadLetterRecord(e.out.Topic, e.src, headerValue(e.out, kdelay.HeaderError), size/2)
	if recordBytes(out.Key, out.Value, out.Headers)+batchOverhead >= size {
		return false // nothing left to cut
	}
	e.out = out
	w.log.Warn("dead_letter_cut", "source", source(e.src), "max_bytes", size/2, "truncated", headerValue(out, kdelay.HeaderTruncated))
	return true
}

// deadLetterRecord is the record put in the DLQ: the original key, value and
// every header unchanged, so it can be fixed and replayed, plus why and from
// where.
//
// A dead letter must fit in the DLQ, whose limit is maxBytes (its
// max.message.bytes, or the client's own batch limit if lower): one that
// does not is refused for good, and would hold its partition's commit point
// forever. So a larger one is cut: the value first, then the key, then the
// record's own headers from the last; the reason and the source always stay,
// and HeaderTruncated says what was cut and how large it was.
func deadLetterRecord(topic string, src *kgo.Record, reason string, maxBytes int) *kgo.Record {
	key, value, own := src.Key, src.Value, src.Headers
	tail := []kgo.RecordHeader{
		{Key: kdelay.HeaderError, Value: []byte(reason)},
		{Key: kdelay.HeaderSource, Value: []byte(source(src))},
	}
	excess := recordBytes(key, value, own) + recordBytes(nil, nil, tail) + batchOverhead - maxBytes
	if excess > 0 {
		excess += truncatedRoom
		var cuts []string
		value, excess, cuts = cut("value", value, excess, cuts)
		key, excess, cuts = cut("key", key, excess, cuts)
		if excess > 0 && len(own) > 0 {
			n := len(own)
			for n > 0 && excess > 0 {
				n--
				excess -= recordBytes(nil, nil, own[n:n+1])
			}
			cuts = append(cuts, fmt.Sprintf("headers=%d/%d", headerBytes(own), headerBytes(own[:n])))
			own = own[:n]
		}
		tail = append(tail, kgo.RecordHeader{Key: kdelay.HeaderTruncated, Value: []byte(strings.Join(cuts, ","))})
	}
	hs := make([]kgo.RecordHeader, 0, len(own)+len(tail))
	return &kgo.Record{Topic: topic, Key: key, Value: value, Headers: append(append(hs, own...), tail...)}
}

// cut keeps the first bytes of b, dropping up to excess of them, and notes
// the cut as part=original/kept.
func cut(part string, b []byte, excess int, cuts []string) ([]byte, int, []string) {
	if excess <= 0 || len(b) == 0 {
		return b, excess, cuts
	}
	keep := max(len(b)-excess, 0)
	cuts = append(cuts, fmt.Sprintf("%s=%d/%d", part, len(b), keep))
	return b[:keep:keep], excess - (len(b) - keep), cuts
}

// recordBytes is a record's key, value and headers with their length
// prefixes, as a batch holds them.
func recordBytes(key, value []byte, hs []kgo.RecordHeader) int {
	return len(key) + len(value) + headerBytes(hs) + len(hs)*headerOverhead
}

// headerBytes is the bytes of the headers' names and values.
func headerBytes(hs []kgo.RecordHeader) int {
	n := 0
	for _, h := range hs {
		n += len(h.Key) + len(h.Value)
	}
	return n
}

// headerValue is the value of r's first header called name, "" if none.
func headerValue(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}
