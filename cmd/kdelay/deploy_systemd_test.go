package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/forwarder"
)

const systemdUnit = "../../deploy/systemd/kdelay.service"

// unit is the systemd unit's directives, those commented out (#Key=value,
// the ones a user may turn on) included.
type unit map[string][]string

func readUnit(t *testing.T) unit {
	t.Helper()
	text, err := os.ReadFile(systemdUnit)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	for _, m := range regexp.MustCompile(`(?m)^#?([A-Z][A-Za-z]+)=(.*)$`).FindAllStringSubmatch(string(text), -1) {
		u[m[1]] = append(u[m[1]], m[2])
	}
	return u
}

func TestDeploySystemd(t *testing.T) {
	t.Parallel()
	u := readUnit(t)

	t.Run("ExecStart and every variable, commented out or not, load as kdelay serve's settings", func(t *testing.T) {
		t.Parallel()
		cfg, environ := u.load(t)
		checkEnviron(t, cfg, environ)
	})

	t.Run("a mistake in the configuration is not restarted", func(t *testing.T) {
		t.Parallel()
		want := strconv.Itoa(exitCode(usageError{errors.New("a mistake")}, io.Discard))
		if got := u["RestartPreventExitStatus"]; !slices.Equal(got, []string{want}) {
			t.Errorf("RestartPreventExitStatus=%v, want %s, kdelay's exit status for a mistake in the command line or configuration", got, want)
		}
	})

	t.Run("stopping waits longer than kdelay's shutdown", func(t *testing.T) {
		t.Parallel()
		d, err := time.ParseDuration(strings.Join(u["TimeoutStopSec"], ""))
		if err != nil || d <= forwarder.DefaultShutdownTimeout {
			t.Errorf("TimeoutStopSec=%v, want more than shutdown-timeout %s", u["TimeoutStopSec"], forwarder.DefaultShutdownTimeout)
		}
	})

	t.Run("systemd-analyze verify finds nothing, with every directive on", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("systemd-analyze"); err != nil {
			t.Skip("systemd-analyze is not on PATH (apt-get install systemd)")
		}
		text, err := os.ReadFile(systemdUnit)
		if err != nil {
			t.Fatal(err)
		}
		on := regexp.MustCompile(`(?m)^#([A-Z][A-Za-z]+=)`).ReplaceAllString(string(text), "$1")
		// verify wants ExecStart's program to exist.
		on = strings.Replace(on, "ExecStart="+u.execStart(t)[0], "ExecStart="+binary(t), 1)
		path := filepath.Join(t.TempDir(), "kdelay.service")
		writeText(t, path, on)
		out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify: %v\n%s", err, out)
		}
	})
}

// execStart is ExecStart's words.
func (u unit) execStart(t *testing.T) []string {
	t.Helper()
	if len(u["ExecStart"]) != 1 {
		t.Fatalf("ExecStart=%q, want one", u["ExecStart"])
	}
	words := strings.Fields(u["ExecStart"][0])
	if filepath.Base(words[0]) != "kdelay" {
		t.Fatalf("ExecStart runs %s, want kdelay", words[0])
	}
	return words
}

// load loads the settings of ExecStart and of every Environment= line,
// with a credential for each LoadCredential= in %d and the config file the
// unit names written as its comment says: brokers, and for the secured
// lines tls, sasl-mechanism and sasl-username.
func (u unit) load(t *testing.T) (config.Config, []string) {
	t.Helper()
	dir := t.TempDir()
	credentials := filepath.Join(dir, "credentials")
	if err := os.Mkdir(credentials, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range u["LoadCredential"] {
		name, _, _ := strings.Cut(c, ":")
		writeSecret(t, filepath.Join(credentials, name))
	}
	var environ []string
	for _, e := range u["Environment"] {
		if !strings.HasPrefix(e, config.EnvPrefix) {
			t.Errorf("Environment=%s: kdelay reads only %s* variables", e, config.EnvPrefix)
		}
		environ = append(environ, strings.ReplaceAll(e, "%d", credentials))
	}
	file := filepath.Join(dir, "kdelay.yaml")
	writeText(t, file, "brokers: [kafka-1:9093]\ntls: true\nsasl-mechanism: SCRAM-SHA-512\nsasl-username: kdelay\n")
	args := u.execStart(t)[1:]
	if i := slices.Index(args, "--config"); i >= 0 && i+1 < len(args) {
		args[i+1] = file
	} else {
		t.Fatalf("ExecStart %q names no --config file", args)
	}
	return loadServe(t, args, environ), environ
}
