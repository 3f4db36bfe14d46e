package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
)

// The states of an order.
const (
	open   = "open"
	paid   = "paid"
	closed = "closed"
)

// shop closes the orders that are not paid closeAfter after they were
// placed. Placing an order sends a "close" record through kdelay, due then;
// paying cancels it. The consumer of target closes the order when the record
// arrives. Nothing waits in this process: the pending records stay in Kafka,
// and a restarted shop closes its orders all the same.
type shop struct {
	p          *client.Producer
	target     string        // topic close records are delivered to
	closeAfter time.Duration // an unpaid order is closed this long after it was placed

	mu     sync.Mutex
	orders map[string]string // order id to state: the shop's database
}

func newShop(p *client.Producer, target string, closeAfter time.Duration) *shop {
	return &shop{p: p, target: target, closeAfter: closeAfter, orders: map[string]string{}}
}

// closeID is the kdelay-id of an order's close record: the order id names it,
// so paying needs nothing kept from placing.
func closeID(order string) string { return "close-" + order }

// place records a new open order and sends its close record, due closeAfter
// from now; kdelay never delivers it before then.
func (s *shop) place(ctx context.Context, order string) error {
	s.mu.Lock()
	s.orders[order] = open
	s.mu.Unlock()
	rec := &kgo.Record{Key: []byte(order), Value: []byte("close")}
	if _, err := s.p.Send(ctx, s.target, rec, client.After(s.closeAfter), client.WithID(closeID(order))); err != nil {
		return fmt.Errorf("order %s: send its close record: %w", order, err)
	}
	return nil
}

// pay marks an open order paid, then cancels its close record. The order is
// marked first: a cancel cannot undo a delivery, so a close record that
// arrives between the two (or before the cancel reaches kdelay) must find
// the order paid, and close leaves a paid order alone.
func (s *shop) pay(ctx context.Context, order string) error {
	s.mu.Lock()
	state := s.orders[order]
	if state == open {
		s.orders[order] = paid
	}
	s.mu.Unlock()
	if state != open {
		return fmt.Errorf("order %s is %q: only an open order can be paid", order, state)
	}
	if err := s.p.Cancel(ctx, closeID(order)); err != nil {
		return fmt.Errorf("order %s: cancel its close record: %w", order, err)
	}
	return nil
}

// close closes order if it is still open: what the consumer of close
// records does with one. It returns the order's state before: open when it
// closed it; paid when the close record arrived although the order was paid
// (the cancel came too late); closed for a record delivered twice; "" for an
// order this shop does not know (an earlier run's).
func (s *shop) close(order string) (was string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	was = s.orders[order]
	if was == open {
		s.orders[order] = closed
	}
	return was
}

// in returns the orders in state, sorted.
func (s *shop) in(state string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var orders []string
	for order, st := range s.orders {
		if st == state {
			orders = append(orders, order)
		}
	}
	slices.Sort(orders)
	return orders
}

// closing is a close record that arrived.
type closing struct {
	order string
	due   time.Time // when kdelay was to deliver it: placed plus closeAfter
	at    time.Time // when it arrived
}

// consume reads close records with cl, a client consuming their target
// topic, and calls handle with each as it arrives, until ctx ends. It
// returns nil then, or the first error reading the topic.
func consume(ctx context.Context, cl *kgo.Client, handle func(closing)) error {
	for {
		fetches := cl.PollFetches(ctx)
		at := time.Now()
		if ctx.Err() != nil {
			return nil
		}
		if err := fetches.Err(); err != nil {
			return fmt.Errorf("read close records: %w", err)
		}
		for _, r := range fetches.Records() {
			// kdelay writes the due time on every record it delivers.
			var due time.Time
			for _, h := range r.Headers {
				if h.Key == kdelay.HeaderDeliverAt {
					due, _ = kdelay.ParseDeliverAt(string(h.Value))
				}
			}
			handle(closing{order: string(r.Key), due: due, at: at})
		}
	}
}
