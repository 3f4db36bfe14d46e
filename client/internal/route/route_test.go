package route

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/levels"
)

func planner(t *testing.T) Planner {
	t.Helper()
	set, err := levels.Parse([]string{"1s", "5s", "1m"})
	if err != nil {
		t.Fatal(err)
	}
	p := Planner{Topics: kdelay.Topics{Prefix: "kd"}, Levels: set, MaxDelay: time.Hour, NewID: func() string { return "new" }}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return p
}

var now = time.UnixMilli(1_790_000_000_000)

func TestRecordLevel(t *testing.T) {
	t.Parallel()
	p := planner(t)
	for _, c := range []struct {
		remaining time.Duration
		want      string
	}{
		{-time.Second, "kd.ingress"},
		{0, "kd.ingress"},
		{999 * time.Millisecond, "kd.ingress"},
		{time.Second, "kd.level.1s"},
		{4999 * time.Millisecond, "kd.level.1s"},
		{5 * time.Second, "kd.level.5s"},
		{59 * time.Minute, "kd.level.1m"},
	} {
		pl, _, err := Record[kdelay.Header](p, "orders", nil, Options{}, now, now.Add(c.remaining))
		if err != nil || pl.Topic != c.want || !pl.Timestamp.Equal(now) {
			t.Errorf("Record with %s remaining: %s at %s, %v; want %s at %s", c.remaining, pl.Topic, pl.Timestamp, err, c.want, now)
		}
	}
}

func h(k, v string) kdelay.Header { return kdelay.Header{Key: k, Value: []byte(v)} }

func TestRecordHeaders(t *testing.T) {
	t.Parallel()
	p := planner(t)
	due := now.Add(90 * time.Second)
	hop := func(id string) []kdelay.Header {
		return []kdelay.Header{h(kdelay.HeaderID, id), h(kdelay.HeaderDeliverAt, "1790000090000"), h(kdelay.HeaderTarget, "orders")}
	}
	for _, c := range []struct {
		name string
		hs   []kdelay.Header
		o    Options
		want []kdelay.Header // the user's, then hop(id)
		id   string
	}{
		{"a record without id gets a new one", nil, Options{}, nil, "new"},
		{"the record's kdelay-id is kept", []kdelay.Header{h("a", "1"), h(kdelay.HeaderID, "mine")}, Options{}, []kdelay.Header{h("a", "1")}, "mine"},
		{"WithID sets the id", nil, Options{ID: "opt", HasID: true}, nil, "opt"},
		{"WithID wins over the record's kdelay-id", []kdelay.Header{h(kdelay.HeaderID, "mine")}, Options{ID: "opt", HasID: true}, nil, "opt"},
		{"WithHeaders come after the record's, in order", []kdelay.Header{h("a", "1")}, Options{Headers: []kdelay.Header{h("b", "2"), h("a", "3")}},
			[]kdelay.Header{h("a", "1"), h("b", "2"), h("a", "3")}, "new"},
		{"a kdelay-id in WithHeaders is the id", nil, Options{Headers: []kdelay.Header{h(kdelay.HeaderID, "hdr")}}, nil, "hdr"},
		{"the caller's routing headers are dropped",
			[]kdelay.Header{h(kdelay.HeaderTarget, "x"), h("a", "1"), h(kdelay.HeaderDelay, "5"), h(kdelay.HeaderDeliverAt, "7")},
			Options{Headers: []kdelay.Header{h(kdelay.HeaderDelay, "9")}}, []kdelay.Header{h("a", "1")}, "new"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pl, hs, err := Record(p, "orders", c.hs, c.o, now, due)
			want := append(slices.Clone(c.want), hop(c.id)...)
			if err != nil || pl.ID != c.id || !slices.EqualFunc(hs, want, equal) {
				t.Errorf("Record = id %q, headers %s, %v; want id %q, headers %s", pl.ID, hs, err, c.id, want)
			}
			// What the server reads from it is what was planned.
			rt, _, err := kdelay.Parse(pl.Timestamp, hs, kdelay.Rules{Topics: p.Topics, MaxDelay: p.MaxDelay})
			if err != nil || rt.ID != pl.ID || !rt.Due.Equal(pl.Due) || rt.Target != "orders" {
				t.Errorf("the server parses %+v, %v; want id %q due %s target orders", rt, err, pl.ID, pl.Due)
			}
		})
	}
}

func equal(a, b kdelay.Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }

// A record the server would dead-letter is refused with the server's reason.
func TestRecordRefuses(t *testing.T) {
	t.Parallel()
	p := planner(t)
	for _, c := range []struct {
		name, target string
		hs           []kdelay.Header
		o            Options
		due          time.Duration
		want         string
	}{
		{"an empty target", "", nil, Options{}, time.Second, "header kdelay-target is missing"},
		{"an invalid target name", "orders/eu", nil, Options{}, time.Second, "not a valid topic name"},
		{"kdelay's ingress", "kd.ingress", nil, Options{}, time.Second, "kdelay's own topic"},
		{"a level the producer does not know", "kd.level.2h", nil, Options{}, time.Second, "kdelay's own topic"},
		{"a delay beyond MaxDelay", "orders", nil, Options{}, time.Hour + time.Millisecond, "more than the maximum delay"},
		{"an empty kdelay-id header", "orders", []kdelay.Header{h(kdelay.HeaderID, "")}, Options{}, time.Second, "header kdelay-id is empty"},
		{"an empty WithID", "orders", nil, Options{HasID: true}, time.Second, "header kdelay-id is empty"},
		{"two kdelay-id headers", "orders", []kdelay.Header{h(kdelay.HeaderID, "a"), h(kdelay.HeaderID, "b")}, Options{}, time.Second, "set it once"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Record(p, c.target, c.hs, c.o, now, now.Add(c.due))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "dead-letter") {
				t.Errorf("Record: %v, want an error saying kdelay would dead-letter it: %q", err, c.want)
			}
		})
	}
	if err := p.CheckPrefix(Options{Prefix: "other"}); err == nil || !strings.Contains(err.Error(), "for Delayed") {
		t.Errorf("CheckPrefix(other): %v, want an error saying WithTopicPrefix is for Delayed", err)
	}
}

func TestCheckTopics(t *testing.T) {
	t.Parallel()
	p := planner(t)
	missing := func(gone ...string) func(context.Context, []string) ([]string, error) {
		return func(context.Context, []string) ([]string, error) { return gone, nil }
	}
	if err := CheckTopics(context.Background(), p, time.Second, missing()); err != nil {
		t.Errorf("CheckTopics with every topic: %v, want nil", err)
	}
	err := CheckTopics(context.Background(), p, time.Second, missing("kd.ingress", "kd.level.5s"))
	want := `topics kd.ingress, kd.level.5s do not exist: is kdelay running with topic prefix "kd" and levels [1s 5s 1m]?`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckTopics with two missing: %v, want %q", err, want)
	}
	err = CheckTopics(context.Background(), p, time.Second, missing("kd.control"))
	want = `topic kd.control does not exist: is kdelay running with topic prefix "kd" and levels [1s 5s 1m]? Topics and Levels must match the server's; ` +
		`kdelay serve creates kd.control at start, and a kdelay older than commands has none: upgrade it, or create the topic with cleanup.policy=compact,delete`
	if err == nil || err.Error() != want {
		t.Errorf("CheckTopics without the control topic:\n got %v\nwant %s", err, want)
	}
	var asked []string
	err = CheckTopics(context.Background(), p, 20*time.Millisecond, func(ctx context.Context, topics []string) ([]string, error) {
		asked = topics
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "SkipTopicCheck") {
		t.Errorf("CheckTopics on a broker that does not answer: %v, want the deadline and how to skip the check", err)
	}
	if want := []string{"kd.ingress", "kd.level.1s", "kd.level.5s", "kd.level.1m", "kd.control"}; !slices.Equal(asked, want) {
		t.Errorf("CheckTopics asked for %v, want %v", asked, want)
	}
}
