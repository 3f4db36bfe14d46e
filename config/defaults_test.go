package config

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/console"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/schedule"
)

// sharedDefault is a key's default on the command line (cli) and in a
// library's Config (lib), which is libSource's.
type sharedDefault struct {
	key       string
	cli, lib  any
	libSource string
}

// TestDefaultsAreTheLibrarys checks that kdelay serve with no settings
// behaves as the library with a zero Config: every setting they share has
// one default. A key added to keys() must be listed here, as shared or as
// the command line's own.
func TestDefaultsAreTheLibrarys(t *testing.T) {
	t.Parallel()
	c, err := load(t, sources{})
	if err != nil {
		t.Fatalf("Load with nothing set: %v", err)
	}
	// On a cluster: on the embedded broker, retention has a default of the
	// command line's own (DefaultEmbeddedRetention).
	onCluster, err := load(t, sources{env: []string{"KDELAY_BROKERS=kafka1:9092"}})
	if err != nil {
		t.Fatalf("Load with brokers: %v", err)
	}
	fw := forwarder.Config{}.WithDefaults()
	pr := client.ProducerConfig{}.WithDefaults()
	shared := []sharedDefault{
		{"topic-prefix", c.TopicPrefix, fw.Topics.Prefix, "forwarder"},
		{"topic-prefix", c.TopicPrefix, pr.Topics.Prefix, "client producer"},
		{"levels", c.Levels, fw.Levels, "forwarder"},
		{"levels", c.Levels, pr.Levels, "client producer"},
		{"partitions", c.Partitions, fw.Partitions, "forwarder"},
		{"replication-factor", c.ReplicationFactor, fw.ReplicationFactor, "forwarder"},
		{"retention", onCluster.Retention, fw.Retention, "forwarder"},
		{"retention-headroom", c.RetentionHeadroom, fw.RetentionHeadroom, "forwarder"},
		{"group", c.Group, fw.Group, "forwarder"},
		{"mode", forwarder.Mode(c.Mode), fw.Mode, "forwarder"},
		{"check-interval", c.CheckInterval, fw.CheckInterval, "forwarder"},
		{"fetch-max-wait", c.FetchMaxWait, fw.FetchMaxWait, "forwarder"},
		{"idle-fetch-max-wait", c.IdleFetchMaxWait, fw.IdleFetchMaxWait, "forwarder"},
		{"max-buffered-bytes", c.MaxBufferedBytes, fw.MaxBufferedBytes, "forwarder"},
		{"max-delay", c.MaxDelay, fw.MaxDelay, "forwarder"},
		{"max-delay", c.MaxDelay, pr.MaxDelay, "client producer"},
		{"delivery-timeout", c.DeliveryTimeout, fw.DeliveryTimeout, "forwarder"},
		{"delivery", forwarder.Delivery(c.Delivery), fw.Delivery, "forwarder"},
		{"commit-interval", c.CommitInterval, fw.CommitInterval, "forwarder"},
		{"commit-linger", c.CommitLinger, fw.CommitLinger, "forwarder"},
		{"schedule-lookahead", c.ScheduleLookahead, schedule.Config{}.WithDefaults().Lookahead, "scheduler"},
		{"stuck-after", c.StuckAfter, fw.StuckAfter, "forwarder"},
		{"session-timeout", c.SessionTimeout, fw.SessionTimeout, "forwarder"},
		{"instance-id", forwarder.Config{InstanceID: c.InstanceID}.WithDefaults().InstanceID, fw.InstanceID, "forwarder"},
		{"shutdown-timeout", c.ShutdownTimeout, fw.ShutdownTimeout, "forwarder"},
		{"admin", c.Admin, admin.Config{}.WithDefaults().Addr, "admin listener"},
		{"console-actions", c.ConsoleActions, console.Config{}.WithDefaults().Actions, "console"},
		{"tracing-endpoint", c.TracingEndpoint, admin.TracingConfig{}.WithDefaults().Endpoint, "admin tracing"},
	}
	cliOnly := []string{"brokers", "listen", "data-dir", "log-level", "log-format",
		// A library user makes an admin.Tracing, or not.
		"tracing",
		// A library user passes console.Config.Credentials, read as it likes.
		"console-auth-file",
		// A library user passes TLS and SASL in forwarder.Config.ClientOpts.
		"tls", "tls-ca-file", "tls-cert-file", "tls-key-file", "tls-server-name", "tls-insecure-skip-verify",
		"sasl-mechanism", "sasl-username", "sasl-password", "sasl-password-file", "sasl-oauth-token", "sasl-oauth-token-file"}

	for _, s := range shared {
		t.Run(s.key+" of the "+s.libSource, func(t *testing.T) {
			t.Parallel()
			if !reflect.DeepEqual(s.cli, s.lib) {
				t.Errorf("default %s: command line %v, %s %v", s.key, s.cli, s.libSource, s.lib)
			}
		})
	}
	for _, k := range keys() {
		listed := slices.Contains(cliOnly, k.name) || slices.ContainsFunc(shared, func(s sharedDefault) bool { return s.key == k.name })
		if !listed {
			t.Errorf("key %s is in neither the shared nor the command line's own keys of this test; add it to one", k.name)
		}
	}
}

func TestDurationText(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 9600 * time.Hour: "9600h", 90 * time.Minute: "1h30m", 2 * time.Minute: "2m",
		90 * time.Second: "1m30s", 100 * time.Millisecond: "100ms", time.Hour + time.Second: "1h0m1s",
	} {
		if got := kdelay.DurationText(d); got != want {
			t.Errorf("kdelay.DurationText(%d) = %q, want %q", d, got, want)
		}
	}
}
