package kafkago

import (
	"github.com/segmentio/kafka-go"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/client/internal/route"
)

// Delayed returns a message for kdelay's ingress topic "kdelay.ingress" that
// kdelay delivers to target when it is due, for writing with a kafka.Writer
// of your own that has no Topic:
//
//	w.WriteMessages(ctx, kafkago.Delayed("orders", key, value, client.After(90*time.Second)))
//	kafkago.Delayed("orders", key, value, client.At(t), client.WithID(id), kafkago.WithHeaders(hs...), client.WithTopicPrefix("payments"))
//
// It carries the headers client.Delayed sets, in the same order. kdelay
// counts After from the message's Time, which kafka-go sets when it writes
// the batch if left zero. Delayed does not check its arguments; Producer.Send
// does, and saves the ingress hop.
func Delayed(target string, key, value []byte, when client.Delay, opts ...client.Option) kafka.Message {
	r := client.Delayed(target, key, value, when, opts...)
	m := kafka.Message{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: make([]kafka.Header, 0, len(r.Headers))}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, kafka.Header(h))
	}
	return m
}

// WithHeaders is client.WithHeaders for kafka-go's headers: it adds hs after
// the message's own headers, for Producer.Send and Delayed.
func WithHeaders(hs ...kafka.Header) client.Option {
	return func(o *route.Options) {
		for _, h := range hs {
			o.Headers = append(o.Headers, kdelay.Header(h))
		}
	}
}

// ID returns the kdelay-id of a message kdelay delivered, and whether it has
// one. A message that did not come through kdelay has none.
func ID(m kafka.Message) (string, bool) {
	// kdelay appends its kdelay-id after the user's headers, from which it
	// removed any other, so the last one is kdelay's.
	for i := len(m.Headers) - 1; i >= 0; i-- {
		if m.Headers[i].Key == kdelay.HeaderID {
			return string(m.Headers[i].Value), len(m.Headers[i].Value) > 0
		}
	}
	return "", false
}
