package client

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// Delayed returns a record for kdelay's ingress topic "kdelay.ingress" that
// kdelay delivers to target when it is due, for producing with a kgo.Client
// of your own:
//
//	cl.Produce(ctx, client.Delayed("orders", key, value, client.After(90*time.Second)), onAck)
//
// After(d) becomes kdelay-delay in milliseconds (rounded up), counted by
// kdelay from the record's timestamp, which kgo sets when it is produced;
// At(t) becomes kdelay-deliver-at in epoch milliseconds (rounded up). Add your
// own headers to the record's Headers; for another topic prefix set its
// Topic to kdelay.Topics{Prefix: p}.Ingress().
//
// Delayed does not check its arguments: kdelay dead-letters a record with an
// empty target or a negative delay. Producer.Send checks them, and saves the
// ingress hop.
func Delayed(target string, key, value []byte, when Delay) *kgo.Record {
	return &kgo.Record{
		Topic: kdelay.Topics{}.Ingress(),
		Key:   key,
		Value: value,
		Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(target)},
			when.header(),
		},
	}
}

func (d Delay) header() kgo.RecordHeader {
	if d.abs {
		ms := ceilMillis(d.at).UnixMilli()
		return kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: strconv.AppendInt(nil, ms, 10)}
	}
	return kgo.RecordHeader{Key: kdelay.HeaderDelay, Value: strconv.AppendInt(nil, ceilMs(d.after), 10)}
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
