package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/forwarder/forwardertest"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// closeAfter is the tests' --close-after: short, and longer than the
// largest level (2s) so that close records wait in a level.
const closeAfter = 2500 * time.Millisecond

// lateness bounds how late kdelay may deliver a close record in these
// tests: on kfake, on a shared machine.
const lateness = 5 * time.Second

// An unpaid order is closed when its close record arrives, closeAfter after
// it was placed and not before; a paid order's close record never arrives.
func TestUnpaidClosedPaidNot(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	closings := fx.consume()
	s := newShop(fx.producer(), fx.cfg.target, closeAfter)
	placed := map[string]time.Time{}
	for _, order := range []string{"1", "2", "3", "4"} {
		placed[order] = time.Now()
		if err := s.place(t.Context(), order); err != nil {
			t.Fatalf("place: %v", err)
		}
	}
	for _, order := range []string{"2", "4"} {
		if err := s.pay(t.Context(), order); err != nil {
			t.Fatalf("pay: %v", err)
		}
	}
	check := func(c closing) {
		if early := placed[c.order].Add(closeAfter).Sub(c.at); early > 0 {
			t.Errorf("order %s's close record arrived %s after it was placed: %s early", c.order, c.at.Sub(placed[c.order]), early)
		}
		if was := s.close(c.order); was != open {
			t.Errorf("order %s's close record arrived while it was %q; want only open orders' records", c.order, was)
		}
	}
	deadline := time.After(closeAfter + lateness)
	for len(s.in(closed)) < 2 {
		select {
		case c := <-closings:
			check(c)
		case <-deadline:
			t.Fatalf("%s after placing them, orders closed: %q; want 1 and 3", closeAfter+lateness, s.in(closed))
		}
	}
	// The paid orders' records were due with the others: for as long as
	// the program waits for them, none comes.
	quiet := time.After(settle)
	for {
		select {
		case c := <-closings:
			check(c)
		case <-quiet:
			if got := s.in(paid); !slices.Equal(got, []string{"2", "4"}) {
				t.Errorf("paid orders: %q, want 2 and 4", got)
			}
			return
		}
	}
}

// The command closes the odd-numbered orders, which are not paid, and says
// that the even-numbered ones were paid and never closed.
func TestRun(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	cfg := fx.cfg
	cfg.orders, cfg.closeAfter, cfg.payAfter = 4, closeAfter, time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v; printed:\n%s", err, &out)
	}
	for _, want := range []string{
		`order (\w+)-2 paid: its close record is cancelled`, `order (\w+)-4 paid`,
		`order (\w+)-1 CLOSED unpaid \(due \S+, arrived late by \S+\)`, `order (\w+)-3 CLOSED unpaid`,
		`closed unpaid: (\w+)-1 (\w+)-3; paid, never closed: (\w+)-2 (\w+)-4\n$`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("run did not print %q; printed:\n%s", want, &out)
		}
	}
	if strings.Contains(out.String(), "after it was paid") {
		t.Errorf("a paid order's close record arrived; printed:\n%s", &out)
	}
}

// consume reads the target topic until the test ends and sends each close
// record on the channel it returns.
func (fx *fixture) consume() <-chan closing {
	fx.t.Helper()
	cl := fx.cluster.Client(kgo.ConsumeTopics(fx.cfg.target), kgo.FetchMaxWait(50*time.Millisecond))
	closings := make(chan closing, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consume(ctx, cl, func(c closing) { closings <- c }) }()
	fx.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			fx.t.Errorf("consume: %v", err)
		}
	})
	return closings
}

// fixture is a broker, a kdelay server with levels 1s and 2s on topics of
// the test's own, and the config of a run against it.
type fixture struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	cfg     config
}

func setup(t *testing.T) *fixture {
	t.Helper()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	set, err := levels.Parse([]string{"1s", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	topics := kdelay.Topics{Prefix: name}
	fx := &fixture{t: t, cluster: cluster, cfg: config{
		brokers: cluster.Brokers, topics: topics, levels: set, target: name + ".close",
	}}
	cluster.CreateTopic(fx.cfg.target, 3, nil)
	forwardertest.Serve(t, forwarder.Config{Brokers: cluster.Brokers, Topics: topics, Levels: set, Group: name, Partitions: 2})
	return fx
}

func (fx *fixture) producer() *client.Producer {
	fx.t.Helper()
	p, err := client.NewProducer(fx.t.Context(), fx.cluster.Client(), client.ProducerConfig{Topics: fx.cfg.topics, Levels: fx.cfg.levels})
	if err != nil {
		fx.t.Fatalf("NewProducer: %v", err)
	}
	return p
}
