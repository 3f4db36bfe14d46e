package main

// The files of deploy/ against the code they configure, as far as a test
// can go without a cluster or a systemd of its own: every flag, variable and
// key they set is one kdelay serve takes, the files they name are the ones
// mounted, the probes ask the admin listener's real paths, and the numbers
// they carry come from their homes (the image's user from the Dockerfile,
// the memory from docs/BENCHMARKS.md). deploy_kubernetes_test.go checks
// deploy/kubernetes, deploy_systemd_test.go the systemd unit.

import (
	"os"
	"strings"
	"testing"

	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/kafkatest"
)

// loadServe parses args with kdelay serve's flags and loads its settings.
func loadServe(t *testing.T, args, environ []string) config.Config {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("args %q: want serve and its flags", args)
	}
	serve := newServe()
	if err := serve.ParseFlags(args[1:]); err != nil {
		t.Fatalf("kdelay %s: %v", strings.Join(args, " "), err)
	}
	cfg, err := config.Load(serve.Flags(), environ)
	if err != nil {
		t.Fatalf("kdelay %s with %q: %v", strings.Join(args, " "), environ, err)
	}
	return cfg
}

// settings is every setting's effective value, as serve logs them at start.
func settings(cfg config.Config) map[string]string {
	m := map[string]string{}
	for _, a := range cfg.LogValue().Group() {
		m[a.Key] = a.Value.String()
	}
	return m
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// checkEnviron checks that each KDELAY_ variable of environ set the
// setting it names to its value: a variable that names no setting is
// ignored by kdelay, so it would not.
func checkEnviron(t *testing.T, cfg config.Config, environ []string) {
	t.Helper()
	values := settings(cfg)
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, config.EnvPrefix), "_", "-"))
		if got, ok := values[key]; !ok || got != v {
			t.Errorf("%s=%s: setting %s is %q, want the variable's value: is %s a setting of kdelay serve --help?", name, v, key, got, name)
		}
	}
}

// writeSecret writes a stand-in for a secret file at path: a CA
// certificate for a .pem file, else a password.
func writeSecret(t *testing.T, path string) {
	t.Helper()
	if !strings.HasSuffix(path, ".pem") {
		writeText(t, path, "a-password\n")
		return
	}
	cert, _ := kafkatest.SelfSigned(t, t.TempDir(), "deploy-test-ca")
	if err := os.Rename(cert, path); err != nil {
		t.Fatal(err)
	}
}
