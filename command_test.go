package kdelay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
)

// TestParseCommand is the control topic's contract: what a command record
// says, as kcat or a client writes it, and why a bad one is refused.
func TestParseCommand(t *testing.T) {
	t.Parallel()
	rules := kdelay.Rules{MaxDelay: 100 * time.Hour}
	ok := []struct {
		name    string
		key     string
		headers []kdelay.Header
		want    kdelay.Command
	}{
		{"cancel", "order-42", hs("kdelay-command", "cancel"), kdelay.Command{ID: "order-42", Name: "cancel"}},
		{"run now is due at the command's time", "order-42", hs("kdelay-command", "run-now"),
			kdelay.Command{ID: "order-42", Name: "run-now", Due: ts}},
		{"reschedule by a delay from the command's time", "dev-7", hs("kdelay-command", "reschedule", "kdelay-delay", "30s"),
			kdelay.Command{ID: "dev-7", Name: "reschedule", Due: ts.Add(30 * time.Second)}},
		{"reschedule to a time", "dev-7", hs("kdelay-command", "reschedule", "kdelay-deliver-at", "1795000005000"),
			kdelay.Command{ID: "dev-7", Name: "reschedule", Due: ts.Add(5 * time.Second)}},
		{"reschedule to the past is due at once", "dev-7", hs("kdelay-command", "reschedule", "kdelay-deliver-at", "1"),
			kdelay.Command{ID: "dev-7", Name: "reschedule", Due: time.UnixMilli(1)}},
		{"other headers are ignored", "dev-7", hs("trace", "x", "kdelay-command", "cancel", "kdelay-target", "orders"),
			kdelay.Command{ID: "dev-7", Name: "cancel"}},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			got, err := kdelay.ParseCommand(ts, []byte(c.key), c.headers, rules)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got.ID != c.want.ID || got.Name != c.want.Name || !got.Due.Equal(c.want.Due) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}

	bad := []struct {
		name    string
		key     string
		headers []kdelay.Header
		reason  string
	}{
		{"no key", "", hs("kdelay-command", "cancel"), "set the key to the kdelay-id"},
		{"key kdelay keeps for itself", "\x00order-42", hs("kdelay-command", "cancel"), "NUL byte"},
		{"no command", "order-42", hs("kdelay-delay", "1s"), "kdelay-command is missing"},
		{"unknown command", "order-42", hs("kdelay-command", "delete"), `"delete" is not a command`},
		{"command twice", "order-42", hs("kdelay-command", "cancel", "kdelay-command", "run-now"), "more than once"},
		{"reschedule without a time", "order-42", hs("kdelay-command", "reschedule"), "neither kdelay-delay nor kdelay-deliver-at"},
		{"reschedule with both", "order-42", hs("kdelay-command", "reschedule", "kdelay-delay", "1s", "kdelay-deliver-at", "1"), "set exactly one"},
		{"reschedule too far", "order-42", hs("kdelay-command", "reschedule", "kdelay-delay", "101h"), "maximum delay"},
		{"reschedule to a bad time", "order-42", hs("kdelay-command", "reschedule", "kdelay-deliver-at", "tomorrow"), "kdelay-deliver-at"},
		{"cancel with a time", "order-42", hs("kdelay-command", "cancel", "kdelay-delay", "1s"), "use reschedule"},
		{"run-now with a time", "order-42", hs("kdelay-command", "run-now", "kdelay-deliver-at", "1"), "use reschedule"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			got, err := kdelay.ParseCommand(ts, []byte(c.key), c.headers, rules)
			if err == nil {
				t.Fatalf("accepted as %+v; want refused with %q", got, c.reason)
			}
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("reason %q, want it to say %q", err, c.reason)
			}
		})
	}
}
