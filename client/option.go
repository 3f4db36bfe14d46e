package client

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client/internal/route"
)

// An Option adds to a delayed record what its key and value do not say: its
// id, headers, or kdelay's topic prefix. Pass options after the Delay to
// Producer.Send or Delayed, and to package kafkago's:
//
//	p.Send(ctx, "reminders", rec, client.After(90*time.Second), client.WithID("order-42"))
type Option func(*route.Options)

// WithID sets the record's kdelay-id, the id consumers dedupe by, instead of
// a new one. It replaces a kdelay-id header on the record: the option wins.
// An empty id is refused, as kdelay would dead-letter it. Sending again with
// the id an earlier Send returned is how to retry without two copies under
// two ids.
func WithID(id string) Option {
	return func(o *route.Options) { o.ID, o.HasID = id, true }
}

// WithHeaders adds headers after the record's own; kdelay delivers them in
// order. They are treated as the record's own: a routing header among them
// (kdelay-target, kdelay-delay, kdelay-deliver-at) is dropped by Send, and a
// kdelay-id is the record's id unless WithID is given too.
func WithHeaders(hs ...kgo.RecordHeader) Option {
	return func(o *route.Options) {
		for _, h := range hs {
			o.Headers = append(o.Headers, kdelay.Header(h))
		}
	}
}

// WithTopicPrefix makes Delayed write to the ingress topic of a kdelay
// server run with --topic-prefix prefix, "<prefix>.ingress", instead of
// "kdelay.ingress". A Producer writes to the topics of its
// ProducerConfig.Topics, and Send refuses this option.
func WithTopicPrefix(prefix string) Option {
	return func(o *route.Options) { o.Prefix = prefix }
}
