// Command autoclose closes the orders that are not paid in time, on kdelay:
// placing an order sends a "close" record due --close-after later (30
// minutes by default), paying it cancels that record, and the consumer of
// the close records closes an order still unpaid when its record arrives.
//
// With kdelay serve running (go run ./cmd/kdelay serve), in seconds rather
// than minutes:
//
//	go run ./examples/autoclose --brokers 127.0.0.1:9092 --close-after 10s
//
// It places --orders orders, pays the even-numbered ones after --pay-after,
// and prints which orders were closed and which were paid.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/levels"
)

// config is what the flags set.
type config struct {
	brokers    []string
	topics     kdelay.Topics // kdelay serve's topic prefix
	levels     levels.Set    // kdelay serve's levels
	target     string        // topic close records are delivered to
	orders     int           // how many orders to place
	closeAfter time.Duration // an unpaid order is closed this long after it was placed
	payAfter   time.Duration // when the even-numbered orders are paid
}

// settle is how long run keeps reading close records once every unpaid
// order is closed, to show that the paid ones' never come: they were due at
// the same time, and kdelay is late by milliseconds.
const settle = 2 * time.Second

func main() {
	var cfg config
	brokers := flag.String("brokers", cmp.Or(os.Getenv("KDELAY_LISTEN"), "127.0.0.1:9092"), "Kafka brokers, comma-separated: kdelay serve's --listen address")
	flag.StringVar(&cfg.topics.Prefix, "topic-prefix", kdelay.DefaultPrefix, "kdelay serve's --topic-prefix")
	flag.StringVar(&cfg.target, "target", "orders.close", "topic close records are delivered to")
	flag.IntVar(&cfg.orders, "orders", 4, "orders to place; the even-numbered ones are paid")
	flag.DurationVar(&cfg.closeAfter, "close-after", 30*time.Minute, "an unpaid order is closed this long after it was placed")
	flag.DurationVar(&cfg.payAfter, "pay-after", 0, "when the even-numbered orders are paid (default half of --close-after)")
	flag.Parse()
	cfg.brokers = strings.Split(*brokers, ",")
	cfg.levels = levels.Default() // kdelay serve's, unless configured otherwise
	cfg.payAfter = cmp.Or(cfg.payAfter, cfg.closeAfter/2)
	if cfg.orders < 1 || cfg.payAfter >= cfg.closeAfter {
		fmt.Fprintln(os.Stderr, "autoclose: place at least one order (--orders), and pay before orders close (--pay-after less than --close-after)")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "autoclose:", err)
		os.Exit(1)
	}
}

// run places cfg.orders orders, pays the even-numbered ones after
// cfg.payAfter, and closes the others when their close record arrives. It
// returns once every unpaid order is closed, or when ctx ends, and prints
// what happens to out.
func run(ctx context.Context, cfg config, out io.Writer) error {
	say := printer(out)
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := client.NewProducer(ctx, cl, client.ProducerConfig{Topics: cfg.topics, Levels: cfg.levels})
	if err != nil {
		return fmt.Errorf("%w; is kdelay serve running on %s?", err, strings.Join(cfg.brokers, ","))
	}
	// Read what is delivered from now on: an earlier run's close records
	// are not this run's.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...), kgo.ConsumeTopics(cfg.target),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(start.UnixMilli())),
		kgo.AllowAutoTopicCreation()) // to read before the first delivery creates it, as kdelay serve's embedded broker allows
	if err != nil {
		return err
	}
	defer consumer.Close()

	s := newShop(p, cfg.target, cfg.closeAfter)
	// Order ids must not repeat from one run to the next: kdelay keeps a
	// cancel for hours and applies it to every record with its id.
	batch := make([]byte, 2)
	_, _ = rand.Read(batch) // never fails since Go 1.24
	var toPay []string
	for i := 1; i <= cfg.orders; i++ {
		order := fmt.Sprintf("%s-%d", hex.EncodeToString(batch), i)
		placed := time.Now()
		if err := s.place(ctx, order); err != nil {
			return err
		}
		say("order %s placed: closed at %s unless paid", order, clock(placed.Add(cfg.closeAfter)))
		if i%2 == 0 {
			toPay = append(toPay, order)
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	closings := make(chan closing)
	g.Go(func() error {
		return consume(ctx, consumer, func(c closing) {
			select {
			case closings <- c:
			case <-ctx.Done():
			}
		})
	})
	g.Go(func() error { return payLater(ctx, s, toPay, cfg.payAfter, say) })
	g.Go(func() error {
		defer cancel() // done: stop reading
		return closeUnpaid(ctx, s, closings, cfg.orders-len(toPay), say)
	})
	if err := g.Wait(); err != nil {
		return err
	}
	say("closed unpaid: %s; paid, never closed: %s", strings.Join(s.in(closed), " "), strings.Join(s.in(paid), " "))
	return nil
}

// payLater pays orders after a while, unless ctx ends first.
func payLater(ctx context.Context, s *shop, orders []string, after time.Duration, say func(string, ...any)) error {
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(after):
	}
	for _, order := range orders {
		if err := s.pay(ctx, order); err != nil {
			return err
		}
		say("order %s paid: its close record is cancelled", order)
	}
	return nil
}

// closeUnpaid closes orders as their close records arrive, until the
// unpaid ones are closed and settle has passed, or ctx ends.
func closeUnpaid(ctx context.Context, s *shop, closings <-chan closing, unpaid int, say func(string, ...any)) error {
	var settled <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-settled:
			return nil
		case c := <-closings:
			switch s.close(c.order) {
			case open:
				say("order %s CLOSED unpaid (due %s, arrived late by %s)", c.order, clock(c.due), c.at.Sub(c.due).Round(time.Millisecond))
				if unpaid--; unpaid == 0 {
					settled = time.After(settle)
				}
			case paid:
				// Only if the cancel reached kdelay after the record left:
				// the order was marked paid first, so it stays paid.
				say("order %s: its close record arrived after it was paid; left paid", c.order)
			}
		}
	}
}

// printer returns a function printing a line to out, after the time, from
// any goroutine.
func printer(out io.Writer) func(format string, args ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, clock(time.Now())+"  "+format+"\n", args...)
	}
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }
