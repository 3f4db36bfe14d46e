package forwarder

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/levels"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no brokers", Config{}, "brokers: no seed brokers"},
		{"unknown mode", Config{Brokers: []string{"x:1"}, Mode: "fast"}, `mode: "fast" is not a mode`},
		{"unknown delivery", Config{Brokers: []string{"x:1"}, Delivery: "once"}, `delivery: "once" is not a delivery; use "at-least-once" or "exactly-once"`},
		{"negative interval", Config{Brokers: []string{"x:1"}, CheckInterval: -time.Second}, "check-interval: -1s is negative; use a positive duration, or 0 for the default 100ms"},
		{"retention below largest level", Config{Brokers: []string{"x:1"}, Retention: time.Hour}, "retention: 1h0m0s is shorter than the largest level 2h"},
		{"max delay below smallest level", Config{Brokers: []string{"x:1"}, MaxDelay: time.Millisecond}, "max-delay: 1ms is below the smallest level 1s"},
		{"idle fetch wait below fetch wait", Config{Brokers: []string{"x:1"}, FetchMaxWait: time.Second, IdleFetchMaxWait: 500 * time.Millisecond},
			"idle-fetch-max-wait: 500ms is shorter than fetch-max-wait 1s; make it at least that"},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New error = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

// A fetch-max-wait longer than the idle wait's default raises the default
// with it, rather than fail a configuration that sets only fetch-max-wait.
func TestIdleFetchMaxWaitDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ wait, want time.Duration }{
		{0, DefaultIdleFetchMaxWait},
		{time.Second, DefaultIdleFetchMaxWait},
		{10 * time.Second, 10 * time.Second},
	} {
		if got := (Config{FetchMaxWait: tt.wait}).WithDefaults().IdleFetchMaxWait; got != tt.want {
			t.Errorf("fetch-max-wait %s: idle-fetch-max-wait defaults to %s, want %s", tt.wait, got, tt.want)
		}
	}
}

// TestConfigValidationOrder checks that New reports every problem in the
// order of kdelay's settings, the same on every call: a map ranged over
// once made the order change from run to run.
func TestConfigValidationOrder(t *testing.T) {
	t.Parallel()
	cfg := Config{
		Partitions: -1, Retention: time.Minute, RetentionHeadroom: -time.Second, Mode: "fast",
		CheckInterval: -time.Second, FetchMaxWait: -time.Second, MaxDelay: time.Millisecond,
		DeliveryTimeout: -time.Second, CommitInterval: -time.Second, CommitLinger: -time.Second, SessionTimeout: -time.Second, ShutdownTimeout: -time.Second,
	}
	want := []string{"brokers", "partitions", "retention", "retention-headroom", "mode", "check-interval",
		"fetch-max-wait", "max-delay", "delivery-timeout", "commit-interval", "commit-linger", "session-timeout", "shutdown-timeout"}
	_, first := New(cfg)
	if first == nil {
		t.Fatal("New succeeded with a problem in every setting")
	}
	var keys []string
	for line := range strings.Lines(first.Error()) {
		key, _, _ := strings.Cut(line, ":")
		keys = append(keys, key)
	}
	if !slices.Equal(keys, want) {
		t.Errorf("New reported the keys in this order:\n%s\nwant:\n%s\nerror:\n%v", strings.Join(keys, "\n"), strings.Join(want, "\n"), first)
	}
	for range 20 {
		if _, err := New(cfg); err == nil || err.Error() != first.Error() {
			t.Fatalf("New reported the same problems differently:\n%v\nthen:\n%v", first, err)
		}
	}
}

// TestSharedFetchWithinAShare: one fetch of the client that reads every
// stage (at-least-once) asks a broker for no more than one stage's share of
// max-buffered-bytes, whatever the number of levels. Its records wait in
// the client, decoded, outside the workers' buffers; a fetch of every
// stage's worth let a burst of a million records due at once peak over the
// 128 MiB the defaults are for.
func TestSharedFetchWithinAShare(t *testing.T) {
	t.Parallel()
	for _, names := range [][]string{{"1s"}, {"1s", "5s", "10s", "30s"}, nil} { // nil: the 18 defaults
		cfg := Config{Brokers: []string{"127.0.0.1:1"}}
		if names != nil {
			set, err := levels.Parse(names)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Levels = set
		}
		f, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var topics []string
		for _, s := range f.cfg.stages() {
			topics = append(topics, s.topic)
		}
		cl, err := kgo.NewClient(clientOpts(&f.cfg, f.cfg.Group, topics...)...)
		if err != nil {
			t.Fatal(err)
		}
		got := cl.OptValue(kgo.FetchMaxBytes).(int32)
		cl.Close()
		if share := f.cfg.bufferShare(); int64(got) > share {
			t.Errorf("%d stages: a fetch of the shared client asks for %d bytes, more than a stage's share of %d", len(topics), got, share)
		}
	}
}

// TestPlainClientChecked: a Config.Client that would not read the control
// topic as the control reader needs is refused by New, saying how to make
// one; NewPlainClient's is taken.
func TestPlainClientChecked(t *testing.T) {
	t.Parallel()
	cfg := Config{Brokers: []string{"x:1"}}
	for name, opts := range map[string][]kgo.Opt{
		"read uncommitted":    {kgo.KeepControlRecords()},
		"without the markers": {kgo.FetchIsolationLevel(kgo.ReadCommitted())},
		"in a group":          {kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t")},
	} {
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(cfg.Brokers...))...)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Client = cl
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "make it with forwarder.NewPlainClient") {
			t.Errorf("%s: New error = %v, want one saying to make it with NewPlainClient", name, err)
		}
		cl.Close()
	}
	cl, err := NewPlainClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	cfg.Client = cl
	if _, err := New(cfg); err != nil {
		t.Errorf("New with NewPlainClient's client: %v", err)
	}
}
