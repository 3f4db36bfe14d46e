package route

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/levels"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	set, err := levels.Parse([]string{"1s", "5s", "1m"})
	if err != nil {
		t.Fatal(err)
	}
	p := Planner{Topics: kdelay.Topics{Prefix: "kd"}, Levels: set, MaxDelay: time.Hour, NewID: func() string { return "new" }}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	now := time.UnixMilli(1_790_000_000_000)
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
		pl, err := p.Plan("orders", "", now, now.Add(c.remaining))
		if err != nil || pl.Topic != c.want {
			t.Errorf("Plan with %s remaining: %s, %v; want %s", c.remaining, pl.Topic, err, c.want)
		}
	}

	pl, err := p.Plan("orders", "mine", now, now.Add(90*time.Second))
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	want := []Header{{kdelay.HeaderID, "mine"}, {kdelay.HeaderDeliverAt, "1790000090000"}, {kdelay.HeaderTarget, "orders"}}
	if !slices.Equal(pl.Headers, want) || !pl.Timestamp.Equal(now) || pl.ID != "mine" || pl.Level != "1m" {
		t.Errorf("Plan = %+v, want headers %v, timestamp %s, id mine, level 1m", pl, want, now)
	}
	if pl, _ := p.Plan("orders", "", now, now); pl.ID != "new" {
		t.Errorf("Plan without an id: id %q, want a new one", pl.ID)
	}
	for _, target := range []string{"", "kd.ingress", "kd.dlq", "kd.level.5s"} {
		if _, err := p.Plan(target, "", now, now); err == nil {
			t.Errorf("Plan to target %q: no error, want one", target)
		}
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	key := func(h [2]string) string { return h[0] }
	value := func(h [2]string) string { return h[1] }
	hs := [][2]string{{"a", "1"}, {kdelay.HeaderTarget, "x"}, {kdelay.HeaderID, "id"}, {"b", "2"}, {kdelay.HeaderDelay, "5"}, {kdelay.HeaderDeliverAt, "6"}}
	user, id, err := Split(hs, key, value)
	if err != nil || id != "id" || !slices.Equal(user, [][2]string{{"a", "1"}, {"b", "2"}}) {
		t.Errorf("Split = %v, %q, %v; want the user's headers a and b, id \"id\"", user, id, err)
	}
	_, _, err = Split([][2]string{{kdelay.HeaderID, "1"}, {kdelay.HeaderID, "2"}}, key, value)
	if err == nil || !strings.Contains(err.Error(), "set it once") {
		t.Errorf("Split with two ids: %v, want an error", err)
	}
}
