package config

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// TestLogValue checks the configuration serve logs at start: every key with
// its effective value, and no secret, whichever key holds it.
func TestLogValue(t *testing.T) {
	t.Parallel()
	const secret = "s3cret-Pa55word"
	for _, tt := range []struct {
		name, mechanism, secretKey string
		env                        []string
	}{
		{"password", "SCRAM-SHA-512", "sasl-password", []string{"KDELAY_SASL_USERNAME=alice", "KDELAY_SASL_PASSWORD=" + secret}},
		{"oauth token", "OAUTHBEARER", "sasl-oauth-token", []string{"KDELAY_SASL_OAUTH_TOKEN=" + secret}},
	} {
		t.Run(tt.name+" redacted", func(t *testing.T) {
			t.Parallel()
			env := append([]string{"KDELAY_BROKERS=kafka1:9092", "KDELAY_SASL_MECHANISM=" + tt.mechanism, "KDELAY_ADMIN=:9464",
				"KDELAY_TRACING=true", "KDELAY_TRACING_ENDPOINT=https://otel-collector:4318"}, tt.env...)
			c, err := load(t, sources{env: env, args: []string{"--check-interval=250ms"}})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			var buf bytes.Buffer
			slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", c)
			if strings.Contains(buf.String(), secret) {
				t.Fatalf("the logged configuration holds the secret:\n%s", buf.String())
			}
			var line struct{ Config map[string]string }
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("parse %s: %v", buf.String(), err)
			}
			want := map[string]string{tt.secretKey: Redacted, "sasl-mechanism": tt.mechanism, "brokers": "kafka1:9092",
				"check-interval": "250ms", "admin": ":9464",
				"tracing": "true", "tracing-endpoint": "https://otel-collector:4318", "levels": strings.Join(c.Levels.Names(), ","), "max-buffered-bytes": "64MiB"}
			for k, v := range want {
				if got := line.Config[k]; got != v {
					t.Errorf("logged %s = %q, want %q", k, got, v)
				}
			}
			for _, k := range keys() {
				if _, ok := line.Config[k.name]; !ok && !isSecurity(k.name) {
					t.Errorf("logged configuration has no %s", k.name)
				}
			}
		})
	}
}

// TestLogValueTrace: log-level trace is logged as trace, as it was given,
// not as the slog level it maps to.
func TestLogValueTrace(t *testing.T) {
	t.Parallel()
	c, err := load(t, sources{args: []string{"--log-level=trace"}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got := c.text("log-level"); got != "trace" {
		t.Errorf("log-level logged as %q, want trace", got)
	}
}
