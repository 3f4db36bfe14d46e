package client

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client/internal/route"
)

// Delayed returns a record for kdelay's ingress topic "kdelay.ingress" that
// kdelay delivers to target when it is due, for producing with a kgo.Client
// of your own:
//
//	cl.Produce(ctx, client.Delayed("orders", key, value, client.After(90*time.Second)), onAck)
//	client.Delayed("orders", key, value, client.At(t), client.WithID(id), client.WithHeaders(hs...), client.WithTopicPrefix("payments"))
//
// After(d) becomes kdelay-delay in milliseconds (rounded up), counted by
// kdelay from the record's timestamp, which kgo sets when it is produced;
// At(t) becomes kdelay-deliver-at in epoch milliseconds (rounded up). The
// record's headers are those of WithHeaders, then kdelay-id if WithID is
// given, kdelay-target, and kdelay-delay or kdelay-deliver-at.
//
// Delayed does not check its arguments: kdelay dead-letters a record with an
// empty target, a negative delay or an empty id, saying why. Producer.Send
// checks them, and saves the ingress hop.
func Delayed(target string, key, value []byte, when Delay, opts ...Option) *kgo.Record {
	o := route.Apply(opts)
	hs := make([]kgo.RecordHeader, 0, len(o.Headers)+3)
	for _, h := range o.Headers {
		hs = append(hs, kgo.RecordHeader(h))
	}
	if o.HasID {
		hs = append(hs, kgo.RecordHeader{Key: kdelay.HeaderID, Value: []byte(o.ID)})
	}
	hs = append(hs, kgo.RecordHeader{Key: kdelay.HeaderTarget, Value: []byte(target)}, when.header())
	return &kgo.Record{Topic: kdelay.Topics{Prefix: o.Prefix}.Ingress(), Key: key, Value: value, Headers: hs}
}

func (d Delay) header() kgo.RecordHeader {
	if d.abs {
		return kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: []byte(kdelay.FormatDeliverAt(d.at))}
	}
	return kgo.RecordHeader{Key: kdelay.HeaderDelay, Value: []byte(kdelay.FormatDelay(d.after))}
}

// ID returns the kdelay-id of a record kdelay delivered, and whether it has
// one. A record that did not come through kdelay has none.
func ID(r *kgo.Record) (string, bool) {
	// kdelay appends its kdelay-id after the user's headers, from which it
	// removed any other, so the last one is kdelay's.
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == kdelay.HeaderID {
			return string(r.Headers[i].Value), len(r.Headers[i].Value) > 0
		}
	}
	return "", false
}
