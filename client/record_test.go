package client_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
)

func TestDelayed(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_790_000_000_123).Add(400 * time.Microsecond)
	for _, c := range []struct {
		name string
		when client.Delay
		want []string
	}{
		{"After is kdelay-delay in milliseconds", client.After(90 * time.Second), []string{kdelay.HeaderDelay + "=90000"}},
		{"After rounds up to the millisecond", client.After(1500 * time.Microsecond), []string{kdelay.HeaderDelay + "=2"}},
		{"After(0) is due at once", client.After(0), []string{kdelay.HeaderDelay + "=0"}},
		{"At is kdelay-deliver-at in epoch milliseconds, rounded up", client.At(at), []string{kdelay.HeaderDeliverAt + "=1790000000124"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := client.Delayed("orders", []byte("k"), []byte("v"), c.when)
			want := append([]string{kdelay.HeaderTarget + "=orders"}, c.want...)
			if hs := headers(r); !slices.Equal(hs, want) {
				t.Errorf("headers %q, want %q", hs, want)
			}
			if r.Topic != "kdelay.ingress" || string(r.Key) != "k" || string(r.Value) != "v" {
				t.Errorf("topic %q key %q value %q, want kdelay.ingress, k, v", r.Topic, r.Key, r.Value)
			}
			if !r.Timestamp.IsZero() {
				t.Errorf("timestamp %s, want zero for kgo to set when producing", r.Timestamp)
			}
		})
	}
}

func TestDelayDue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 8, 0, 0, 250_000, time.UTC) // 0.25ms past the second
	for _, c := range []struct {
		name string
		when client.Delay
		want time.Time
	}{
		{"After counts from now, rounded up to the millisecond", client.After(time.Second), time.Date(2026, 11, 22, 8, 0, 1, 1_000_000, time.UTC)},
		{"zero Delay is now", client.Delay{}, time.Date(2026, 11, 22, 8, 0, 0, 1_000_000, time.UTC)},
		{"At a whole millisecond is that time", client.At(now.Add(-250 * time.Microsecond)), now.Add(-250 * time.Microsecond)},
		{"At in the past stays in the past", client.At(now.Add(-time.Hour)), time.Date(2026, 11, 22, 7, 0, 0, 1_000_000, time.UTC)},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.when.Due(now)
			if err != nil || !got.Equal(c.want) {
				t.Errorf("%s.Due(%s) = %s, %v; want %s", c.when, now, got, err, c.want)
			}
		})
	}
	for _, when := range []client.Delay{client.After(-time.Millisecond), client.At(time.Time{})} {
		if _, err := when.Due(now); err == nil {
			t.Errorf("%s.Due: no error, want one", when)
		}
	}
}

func TestID(t *testing.T) {
	t.Parallel()
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: kdelay.HeaderID, Value: []byte("id-1")}}}
	if id, ok := client.ID(r); id != "id-1" || !ok {
		t.Errorf("ID = %q, %v; want id-1, true", id, ok)
	}
	if id, ok := client.ID(&kgo.Record{}); id != "" || ok {
		t.Errorf("ID of a record without %s = %q, %v; want \"\", false", kdelay.HeaderID, id, ok)
	}
}
