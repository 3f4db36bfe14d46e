package client_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

func TestProducer(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	p, err := client.NewProducer(context.Background(), fx.cluster.Client(kgo.ProducerLinger(0)), fx.cfg)
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	fx.sendThrough(func(ctx context.Context, target string, m message, when client.Delay) (string, error) {
		r := &kgo.Record{Key: m.key, Value: m.value, Headers: recordHeaders(m.headers)}
		var opts []client.Option
		if m.extra != nil {
			opts = append(opts, client.WithHeaders(recordHeaders(m.extra)...))
		}
		if m.id != "" {
			opts = append(opts, client.WithID(m.id))
		}
		return p.Send(ctx, target, r, when, opts...)
	})
}

func recordHeaders(hs [][2]string) []kgo.RecordHeader {
	var rhs []kgo.RecordHeader
	for _, h := range hs {
		rhs = append(rhs, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
	}
	return rhs
}

// message is what a sender sends: a key, a value and headers, plus the
// headers of WithHeaders (extra) and the id of WithID, when not nil or "".
type message struct {
	key, value []byte
	headers    [][2]string
	extra      [][2]string
	id         string
}

// sender sends one delayed record the way the producer under test does.
type sender func(ctx context.Context, target string, m message, when client.Delay) (string, error)

// sendCase is one record of an end-to-end test: due offset after the time of
// sending, or at that time plus offset, written first to the level via (""
// for the ingress topic).
type sendCase struct {
	name   string
	offset time.Duration
	at     bool
	via    string
	id     string      // the caller's kdelay-id header, "" for none
	withID string      // the id of WithID, "" for none
	extra  [][2]string // the headers of WithHeaders
}

var sendCases = []sendCase{
	{name: "now", via: ""},
	{name: "300ms", offset: 300 * time.Millisecond, via: ""},
	{name: "1.5s", offset: 1500 * time.Millisecond, via: "1s"},
	{name: "2.5s", offset: 2500 * time.Millisecond, via: "2s"},
	{name: "4.2s", offset: 4200 * time.Millisecond, via: "2s"},
	{name: "at an hour ago", offset: -time.Hour, at: true, via: ""},
	{name: "at 1.2s from now", offset: 1200 * time.Millisecond, at: true, via: "1s"},
	{name: "caller's id", offset: 300 * time.Millisecond, via: "", id: "order-42"},
	{name: "WithID", offset: 1200 * time.Millisecond, via: "1s", withID: "order-43"},
	{name: "WithID over the caller's id", offset: 300 * time.Millisecond, via: "", id: "order-44", withID: "order-45"},
	{name: "WithHeaders", offset: 2100 * time.Millisecond, via: "2s", extra: [][2]string{{"b", "2"}, {"a", "3"}}},
}

// wantID is the id a case's record must have, "" for a new one.
func (c sendCase) wantID() string {
	if c.withID != "" {
		return c.withID
	}
	return c.id
}

// sent is a record as sent: its id, when Send was called and returned, and
// the range its due time must be in.
type sent struct {
	sendCase
	id             string
	before, after  time.Time
	dueMin, dueMax time.Time
}

// sendThrough sends every case with send, then checks that each arrives on
// the target once, not before it is due, and went first where it should.
func (fx *fixture) sendThrough(send sender) []sent {
	fx.t.Helper()
	sends := make([]sent, 0, len(sendCases))
	for _, c := range sendCases {
		sends = append(sends, fx.send(send, c))
	}
	fx.t.Run("each arrives once, not before it is due, with its headers", func(t *testing.T) {
		fx.checkDelivered(t, sends)
	})
	fx.t.Run("each goes straight to the level that fits, or to the ingress topic below the smallest", func(t *testing.T) {
		fx.checkRouted(t, sends)
	})
	return sends
}

func (fx *fixture) send(send sender, c sendCase) sent {
	fx.t.Helper()
	// Routing headers of the caller's are dropped; the server would
	// dead-letter a record that has them twice.
	hs := [][2]string{{"case", c.name}, {kdelay.HeaderTarget, "nowhere"}, {"a", "1"},
		{kdelay.HeaderDelay, "5"}, {kdelay.HeaderDeliverAt, "7"}}
	if c.id != "" {
		hs = append(hs, [2]string{kdelay.HeaderID, c.id})
	}
	s := sent{sendCase: c, before: time.Now()}
	when := client.After(c.offset)
	s.dueMin, s.dueMax = kdelay.CeilMillis(s.before.Add(c.offset)), time.Time{}
	if c.at {
		when = client.At(s.before.Add(c.offset))
		s.dueMax = s.dueMin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := message{key: []byte(c.name), value: []byte("value of " + c.name), headers: hs, extra: c.extra, id: c.withID}
	id, err := send(ctx, fx.target, m, when)
	if err != nil {
		fx.t.Fatalf("send %s: %v", c.name, err)
	}
	s.id, s.after = id, time.Now()
	if !c.at {
		s.dueMax = kdelay.CeilMillis(s.after.Add(c.offset))
	}
	if want := c.wantID(); want != "" && id != want {
		fx.t.Errorf("send %s returned id %q, want the caller's %q", c.name, id, want)
	}
	return s
}

func (fx *fixture) checkDelivered(t *testing.T, sends []sent) {
	last := time.Now()
	for _, s := range sends {
		last = later(last, s.dueMax)
	}
	// Read on for a while after the last is due, to catch duplicates.
	got := fx.cluster.Collect(fx.target).Until(30*time.Second, func(got []kafkatest.Arrival) bool {
		return time.Now().After(last.Add(500*time.Millisecond)) && len(byID(got)) >= len(sends)
	})
	ids := byID(got)
	for _, s := range sends {
		as := ids[s.id]
		if len(as) != 1 {
			t.Errorf("%s: %d records with %s %q on the target, want 1", s.name, len(as), kdelay.HeaderID, s.id)
			continue
		}
		a := as[0]
		due := kafkatest.DeliverAt(t, a.Record)
		if due.Before(s.dueMin) || due.After(s.dueMax) {
			t.Errorf("%s: %s = %s, want between %s and %s", s.name, kdelay.HeaderDeliverAt, due, s.dueMin, s.dueMax)
		}
		if a.At.Before(due) {
			t.Errorf("%s: arrived at %s, %s before it was due", s.name, a.At, due.Sub(a.At))
		}
		want := []string{"case=" + s.name, "a=1"}
		for _, h := range s.extra {
			want = append(want, h[0]+"="+h[1])
		}
		want = append(want, kdelay.HeaderID+"="+s.id, kdelay.HeaderDeliverAt+"="+kdelay.FormatDeliverAt(due))
		if hs := headers(a.Record); !slices.Equal(hs, want) {
			t.Errorf("%s: headers %q, want %q", s.name, hs, want)
		}
		if string(a.Key) != s.name || string(a.Value) != "value of "+s.name {
			t.Errorf("%s: key %q value %q, want %q and %q", s.name, a.Key, a.Value, s.name, "value of "+s.name)
		}
		if !s.at || s.offset > 0 {
			t.Logf("%s: late by %s", s.name, a.At.Sub(due))
		}
	}
}

func (fx *fixture) checkRouted(t *testing.T, sends []sent) {
	topics := []string{fx.cfg.Topics.Ingress()}
	for _, l := range fx.cfg.Levels {
		topics = append(topics, fx.cfg.Topics.Level(l.Name))
	}
	c := fx.cluster.Collect(topics[0], kgo.ConsumeTopics(topics...))
	got := byID(c.Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(byID(got)) >= len(sends) }))
	for _, s := range sends {
		want := fx.cfg.Topics.Ingress()
		if s.via != "" {
			want = fx.cfg.Topics.Level(s.via)
		}
		as := got[s.id]
		if len(as) == 0 {
			t.Errorf("%s: not in %s, want it in %s", s.name, strings.Join(topics, ", "), want)
			continue
		}
		// The first is the producer's; the server may hop it on.
		first := as[0]
		if first.Topic != want {
			t.Errorf("%s: first written to %s, want %s", s.name, first.Topic, want)
		}
		if first.Timestamp.Before(s.before.Truncate(time.Millisecond)) || first.Timestamp.After(s.after) {
			t.Errorf("%s: timestamp %s, want the time of sending, between %s and %s", s.name, first.Timestamp, s.before, s.after)
		}
		if target, _ := kafkatest.Header(first.Record, kdelay.HeaderTarget); target != fx.target {
			t.Errorf("%s: %s = %q, want %q", s.name, kdelay.HeaderTarget, target, fx.target)
		}
		for _, a := range as[1:] {
			if a.Topic == fx.cfg.Topics.Ingress() {
				t.Errorf("%s: in %s again after %s, want the ingress topic skipped", s.name, a.Topic, first.Topic)
			}
		}
	}
}

// byID groups records by kdelay-id, each group in timestamp order.
func byID(got []kafkatest.Arrival) map[string][]kafkatest.Arrival {
	ids := map[string][]kafkatest.Arrival{}
	for _, a := range got {
		if id, ok := client.ID(a.Record); ok {
			ids[id] = append(ids[id], a)
		}
	}
	for _, as := range ids {
		slices.SortStableFunc(as, func(a, b kafkatest.Arrival) int { return a.Timestamp.Compare(b.Timestamp) })
	}
	return ids
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// A record kdelay would dead-letter fails Send with kdelay's reason, before
// anything is produced.
func TestProducerRefuses(t *testing.T) {
	t.Parallel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1")) // never dialled: every case fails before producing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	p, err := client.NewProducer(context.Background(), cl, client.ProducerConfig{SkipTopicCheck: true})
	if err != nil {
		t.Fatalf("NewProducer: %v", err)
	}
	rec := func(hs ...string) *kgo.Record {
		r := &kgo.Record{Value: []byte("v")}
		for i := 0; i+1 < len(hs); i += 2 {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: hs[i], Value: []byte(hs[i+1])})
		}
		return r
	}
	for _, c := range []struct {
		name, target string
		rec          *kgo.Record
		when         client.Delay
		opts         []client.Option
		want         string
	}{
		{"an empty target", "", rec(), client.After(time.Second), nil, "header kdelay-target is missing"},
		{"an invalid target name", "orders eu", rec(), client.After(time.Second), nil, `header kdelay-target "orders eu" is not a valid topic name`},
		{"kdelay's own topic as target", "kdelay.level.5s", rec(), client.After(time.Second), nil, `names kdelay's own topic "kdelay.level.5s"`},
		{"a delay beyond the maximum", "orders", rec(), client.After(401 * 24 * time.Hour), nil, "more than the maximum delay 9600h (max-delay)"},
		{"a time before 1970", "orders", rec(), client.At(time.Unix(-1, 0)), nil, "is negative"},
		{"an empty kdelay-id header", "orders", rec(kdelay.HeaderID, ""), client.After(time.Second), nil, "header kdelay-id is empty"},
		{"an empty WithID", "orders", rec(), client.After(time.Second), []client.Option{client.WithID("")}, "header kdelay-id is empty"},
		{"two kdelay-id headers", "orders", rec(kdelay.HeaderID, "a", kdelay.HeaderID, "b"), client.After(time.Second), nil, "appears 2 times; set it once"},
		{"a negative delay", "orders", rec(), client.After(-time.Second), nil, "negative delay"},
		{"the zero time", "orders", rec(), client.At(time.Time{}), nil, "the zero time"},
		{"WithTopicPrefix", "orders", rec(), client.After(time.Second), []client.Option{client.WithTopicPrefix("payments")}, "is for Delayed"},
		{"no record", "orders", nil, client.After(time.Second), nil, "nil record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, err := p.Send(context.Background(), c.target, c.rec, c.when, c.opts...)
			if err == nil || !strings.Contains(err.Error(), c.want) || id != "" {
				t.Errorf("Send = %q, %v; want no id and an error saying %q", id, err, c.want)
			}
		})
	}
}

func TestNewProducerRefuses(t *testing.T) {
	t.Parallel()
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	for _, c := range []struct {
		name string
		cl   *kgo.Client
		cfg  client.ProducerConfig
		want string
	}{
		{"no client", nil, client.ProducerConfig{}, "pass a *kgo.Client"},
		{"unsorted levels", cl, client.ProducerConfig{Levels: levels.Set{{Name: "2s", Delay: 2 * time.Second}, {Name: "1s", Delay: time.Second}}}, "levels.Parse"},
		{"a negative maximum delay", cl, client.ProducerConfig{MaxDelay: -time.Hour}, "max-delay"},
		{"a negative topic check timeout", cl, client.ProducerConfig{TopicCheckTimeout: -time.Second}, "leave it 0 for 10s"},
		{"a broker it cannot reach", cl, client.ProducerConfig{TopicCheckTimeout: 200 * time.Millisecond}, "is the broker reachable? Set ProducerConfig.SkipTopicCheck"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := client.NewProducer(context.Background(), c.cl, c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewProducer: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// A prefix or a level the server lacks has no topic: NewProducer says so,
// naming what the server must have, and Send too when the check is skipped,
// rather than leaving the record in a topic nobody reads.
func TestProducerTopicsServerLacks(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	set, err := levels.Parse([]string{"1s", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cfg  client.ProducerConfig
		want string
	}{
		{"a wrong prefix", client.ProducerConfig{Topics: kdelay.Topics{Prefix: "wrong"}, Levels: fx.cfg.Levels},
			`topics wrong.ingress, wrong.level.1s, wrong.level.2s, wrong.control do not exist: is kdelay running with topic prefix "wrong" and levels [1s 2s]?`},
		{"a level the server lacks", client.ProducerConfig{Topics: fx.cfg.Topics, Levels: set},
			fmt.Sprintf("topic %s does not exist: is kdelay running with topic prefix %q and levels [1s 3s]?", fx.cfg.Topics.Level("3s"), fx.cfg.Topics.Prefix)},
	} {
		t.Run(c.name+" fails NewProducer", func(t *testing.T) {
			_, err := client.NewProducer(context.Background(), fx.cluster.Client(), c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewProducer: %v, want an error saying %q", err, c.want)
			}
		})
		t.Run(c.name+" fails Send when the check is skipped", func(t *testing.T) {
			cfg := c.cfg
			cfg.SkipTopicCheck = true
			p, err := client.NewProducer(context.Background(), fx.cluster.Client(), cfg)
			if err != nil {
				t.Fatalf("NewProducer: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			id, err := p.Send(ctx, fx.target, &kgo.Record{Value: []byte("v")}, client.After(5*time.Second))
			if err == nil || !strings.Contains(err.Error(), "does not exist") {
				t.Fatalf("Send: %v, want an error saying the topic does not exist", err)
			}
			if id == "" {
				t.Errorf("Send returned no id with its error, want the id to retry with")
			}
		})
	}
}
