package fleet

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// dead is a dead letter as kdelay writes it: the record's own headers, then
// kdelay-error and kdelay-source, and any more given.
func dead(source string, own []string, more ...string) *kgo.Record {
	r := &kgo.Record{Topic: "kdelay.dlq", Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(1_795_000_000_000)}
	for _, kv := range append(append(own, kdelay.HeaderError+"=topic \"orders\" does not exist", kdelay.HeaderSource+"="+source), more...) {
		k, v, _ := strings.Cut(kv, "=")
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return r
}

func TestReplayRecord(t *testing.T) {
	t.Parallel()
	rules := kdelay.Rules{}
	tests := []struct {
		name    string
		rec     *kgo.Record
		headers []string // of the replayed record, in order
		refused string   // what the refusal says; "" when replayed
	}{
		{"failed at the ingress without an id: gets its source as id, as serve gave it",
			dead("kdelay.ingress/2/7", []string{"trace=1", "kdelay-target=orders", "kdelay-delay=0"}),
			[]string{"trace=1", "kdelay-target=orders", "kdelay-delay=0", "kdelay-id=kdelay.ingress/2/7"}, ""},
		{"failed after a hop: keeps its id and absolute due time",
			dead("kdelay.level.1m/0/3", []string{"trace=1", "kdelay-id=order-42", "kdelay-deliver-at=1795000000000", "kdelay-target=orders"}),
			[]string{"trace=1", "kdelay-id=order-42", "kdelay-deliver-at=1795000000000", "kdelay-target=orders"}, ""},
		{"cut to fit the DLQ: refused, the original is lost",
			dead("kdelay.ingress/0/1", []string{"kdelay-target=orders", "kdelay-delay=0"}, kdelay.HeaderTruncated+"=value=1000100/999646"),
			nil, "kdelay-truncated value=1000100/999646): the original is lost"},
		{"a bad header: refused with the reason serve would give again",
			dead("kdelay.ingress/0/1", []string{"kdelay-target=orders"}),
			nil, "kdelay would dead-letter it again: neither kdelay-delay nor kdelay-deliver-at is set"},
		{"no kdelay-source: not kdelay's",
			&kgo.Record{Topic: "kdelay.dlq", Headers: []kgo.RecordHeader{{Key: kdelay.HeaderTarget, Value: []byte("orders")}}},
			nil, "no kdelay-source header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := ReadDeadLetter(tt.rec)
			r, err := d.Replay(rules)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Errorf("replay: %v, want a refusal saying %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			var hs []string
			for _, h := range r.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			if !slices.Equal(hs, tt.headers) || r.Topic != "kdelay.ingress" || string(r.Key) != "k" || string(r.Value) != "v" || !r.Timestamp.Equal(tt.rec.Timestamp) {
				t.Errorf("replayed to %s key %q value %q at %s with headers %q\nwant kdelay.ingress, k, v, the dead letter's timestamp %s, headers %q",
					r.Topic, r.Key, r.Value, r.Timestamp, hs, tt.rec.Timestamp, tt.headers)
			}
			if id, _ := Header(r, kdelay.HeaderID); id != d.ID() {
				t.Errorf("replayed with id %q, dlq list shows %q: they must agree", id, d.ID())
			}
		})
	}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	d := ReadDeadLetter(dead("kdelay.ingress/0/1", []string{"kdelay-target=orders"}))
	tests := []struct {
		name string
		f    Filter
		want bool
	}{
		{"no filter", Filter{}, true},
		{"reason in any case", Filter{Reason: "DOES NOT exist"}, true},
		{"another reason", Filter{Reason: "max.message.bytes"}, false},
		{"target", Filter{Target: "orders"}, true},
		{"target is exact", Filter{Target: "order"}, false},
		{"source", Filter{Sources: map[string]bool{"kdelay.ingress/0/1": true}}, true},
		{"all must match", Filter{Reason: "exist", Target: "payments"}, false},
	}
	for _, tt := range tests {
		if got := tt.f.Match(d); got != tt.want {
			t.Errorf("%s: match = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestChooseOnePerID: of the dead letters a filter matches, replay takes one
// per source and one per id, the newest, so that a record dead-lettered,
// replayed and dead-lettered again is not replayed twice.
func TestChooseOnePerID(t *testing.T) {
	t.Parallel()
	at := func(r *kgo.Record, ms int64) DeadLetter {
		r.Timestamp = time.UnixMilli(ms)
		return ReadDeadLetter(r)
	}
	first := at(dead("kdelay.ingress/0/7", []string{kdelay.HeaderID + "=a"}), 1000)
	again := at(dead("kdelay.ingress/1/9", []string{kdelay.HeaderID + "=a"}), 2000)
	twice := at(dead("kdelay.ingress/0/7", []string{kdelay.HeaderID + "=a"}), 3000)
	other := at(dead("kdelay.ingress/0/8", []string{kdelay.HeaderID + "=b"}), 1500)
	c := newChooser(Filter{})
	for _, d := range []DeadLetter{first, other, again, twice} {
		c.add(d)
	}
	var got []string
	for _, d := range c.chosen {
		got = append(got, d.ID()+"@"+d.Source)
	}
	if want := []string{"a@kdelay.ingress/1/9", "b@kdelay.ingress/0/8"}; !slices.Equal(got, want) {
		t.Errorf("chose %v, want %v: one per id, the newest; a source once", got, want)
	}
}
