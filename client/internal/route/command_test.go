package route

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// when is client.Delay's After and At, which this package cannot import.
type when struct {
	after time.Duration
	at    time.Time
}

func (w when) Due(now time.Time) (time.Time, error) {
	if !w.at.IsZero() {
		return kdelay.CeilMillis(w.at), nil
	}
	if w.after < 0 {
		return time.Time{}, fmt.Errorf("negative delay")
	}
	return kdelay.CeilMillis(now.Add(w.after)), nil
}

func (w when) String() string { return fmt.Sprintf("after %s", w.after) }

// Both producers write the same bytes for a command, and ParseCommand reads
// back the command meant.
func TestCommand(t *testing.T) {
	t.Parallel()
	p := planner(t)
	nowNs := now.Add(123_456 * time.Nanosecond) // Kafka keeps the millisecond
	for _, c := range []struct {
		name    string
		when    When
		headers []string
		due     time.Time
	}{
		{kdelay.CommandCancel, nil, []string{"kdelay-command=cancel"}, time.Time{}},
		{kdelay.CommandRunNow, nil, []string{"kdelay-command=run-now"}, now},
		{kdelay.CommandReschedule, when{after: 1500 * time.Microsecond}, // rounded up, never early
			[]string{"kdelay-command=reschedule", "kdelay-deliver-at=" + kdelay.FormatDeliverAt(now.Add(2*time.Millisecond))}, now.Add(2 * time.Millisecond)},
		{kdelay.CommandReschedule, when{at: now.Add(-time.Minute)},
			[]string{"kdelay-command=reschedule", "kdelay-deliver-at=" + kdelay.FormatDeliverAt(now.Add(-time.Minute))}, now.Add(-time.Minute)},
	} {
		t.Run(fmt.Sprint(c.name, " ", c.when), func(t *testing.T) {
			t.Parallel()
			fc, fhs, err := Command[kgo.RecordHeader](p, c.name, "order-42", c.when, nowNs)
			if err != nil {
				t.Fatalf("Command[kgo.RecordHeader]: %v", err)
			}
			kc, khs, err := Command[kafka.Header](p, c.name, "order-42", c.when, nowNs)
			if err != nil {
				t.Fatalf("Command[kafka.Header]: %v", err)
			}
			var fs, ks []string
			for _, h := range fhs {
				fs = append(fs, h.Key+"="+string(h.Value))
			}
			for _, h := range khs {
				ks = append(ks, h.Key+"="+string(h.Value))
			}
			if !slices.Equal(fs, c.headers) || !slices.Equal(ks, c.headers) {
				t.Errorf("headers %q (franz-go) and %q (kafka-go), want %q for both", fs, ks, c.headers)
			}
			want := kdelay.Command{ID: "order-42", Name: c.name, Due: c.due}
			for _, got := range []Control{fc, kc} {
				if got.Topic != "kd.control" || string(got.Key) != "order-42" || got.Value == nil || len(got.Value) != 0 ||
					!got.Timestamp.Equal(now) || got.Command != want {
					t.Errorf("got %+v, want topic kd.control, key order-42, an empty non-null value, timestamp %s, command %+v", got, now, want)
				}
			}
		})
	}
}

func TestCommandRefused(t *testing.T) {
	t.Parallel()
	p := planner(t) // max delay 1h
	for _, c := range []struct {
		name, cmd, id string
		when          When
		want          string
	}{
		{"no id", kdelay.CommandCancel, "", nil, `cancel "": the id is empty; pass the kdelay-id of the message`},
		{"an id of kdelay's own", kdelay.CommandRunNow, "\x00mark", nil, "starts with a NUL byte"},
		{"not a command", "delete", "order-42", nil, `kdelay would refuse the command: header kdelay-command "delete" is not a command`},
		{"a delay beyond max-delay", kdelay.CommandReschedule, "order-42", when{after: 2 * time.Hour},
			`reschedule "order-42" after 2h0m0s: kdelay would refuse the command: kdelay-command reschedule: `},
		{"a negative delay", kdelay.CommandReschedule, "order-42", when{after: -time.Second}, `reschedule "order-42" after -1s: negative delay`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := Command[kgo.RecordHeader](p, c.cmd, c.id, c.when, now)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}
