package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestExitCodes(t *testing.T) {
	t.Parallel()
	bin, dir := binary(t), t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	typo := filepath.Join(dir, "typo.yaml")
	if err := os.WriteFile(typo, []byte("chek-interval: 50ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// Another serve holds this data directory (the lock is this process's).
	locked := filepath.Join(dir, "locked")
	unlock, err := lockDataDir(locked)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)

	shortSecret := filepath.Join(dir, "console-credentials")
	if err := os.WriteFile(shortSecret, []byte("alice:hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		code int
		want string // in the output
	}{
		{"console actions off loopback without credentials", []string{"serve", "--console-actions", "--admin", "0.0.0.0:0"}, 2,
			"console-actions: is true and admin 0.0.0.0:0 is not on loopback, so whoever reaches it could replay dead letters and cancel messages; set console-auth-file"},
		{"console credentials too short", []string{"serve", "--console-auth-file", shortSecret, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "console-data")}, 2,
			"console-auth-file: " + shortSecret + ": line 1 (alice): the secret has 7 characters; use at least 16"},
		{"bad setting", []string{"serve", "--check-interval", "10x"}, 2,
			`check-interval: "10x" is not a Go duration such as 100ms (from --check-interval)`},
		{"misspelt key in the config file", []string{"serve", "--config", typo}, 2,
			`unknown key "chek-interval"; did you mean "check-interval"?`},
		{"unknown flag", []string{"serve", "--chek-interval", "1s"}, 2, "unknown flag: --chek-interval; did you mean --check-interval?"},
		{"misspelt flag", []string{"serve", "--brokres", "x"}, 2, "unknown flag: --brokres; did you mean --brokers?"},
		{"unknown command", []string{"serv"}, 2, `unknown command "serv" for "kdelay"`},
		{"misspelt command", []string{"sned"}, 2, `unknown command "sned" for "kdelay"; did you mean send?`},
		{"misspelt command with its flags", []string{"sned", "--target", "orders", "--delay", "5s", "hello"}, 2,
			`unknown command "sned" for "kdelay"; did you mean send?`},
		{"nothing close to the command", []string{"frobnicate"}, 2, "unknown command \"frobnicate\" for \"kdelay\"\n"},
		{"no command", nil, 2, "name a command: serve, send, cancel, reschedule, run-now, tail, status or dlq"},
		{"send without a delay", []string{"send", "--target", "orders", "hello"}, 2, "set exactly one of --delay (e.g. 90s) and --at"},
		{"send with a delay and a time", []string{"send", "--target", "orders", "--delay", "1s", "--at", "1", "hello"}, 2, "set exactly one of --delay"},
		{"send without a value", []string{"send", "--target", "orders", "--delay", "1s"}, 2, "give the record's value as VALUE, or - to read it from standard input"},
		{"send with a delay without a unit", []string{"send", "--target", "orders", "--delay", "5", "hello"}, 2, "--delay 5 has no unit: did you mean 5s, or 5ms?"},
		{"send at a time in seconds", []string{"send", "--target", "orders", "--at", strconv.FormatInt(time.Now().Unix(), 10), "hello"}, 2,
			"looks like unix seconds"},
		{"tail without a topic", []string{"tail"}, 2, "accepts 1 arg(s), received 0"},
		{"listen address in use", []string{"serve", "--listen", busy.Addr().String(), "--data-dir", filepath.Join(dir, "data")}, 1,
			"listen: " + busy.Addr().String() + " is already in use, by another kdelay or a Kafka broker: pick a free address with --listen"},
		{"admin address in use", []string{"serve", "--admin", busy.Addr().String(), "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "admin-data")}, 1,
			"admin: " + busy.Addr().String() + " is already in use: pick a free host:port with --admin (or KDELAY_ADMIN)"},
		{"data dir in use", []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", locked}, 1,
			"data-dir: " + locked + " is in use by another kdelay serve: stop it, or give this one its own --data-dir"},
		{"session timeout the broker refuses", []string{"serve", "--session-timeout", "2s", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "session-data")}, 1,
			"refuses session-timeout 2s"},
		{"version", []string{"version"}, 0, "kdelay "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			cmd := command(bin, dir, tt.args...)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// None of these starts kdelay for good; if one does, stop it.
			defer time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() }).Stop()
			err := cmd.Wait()
			var exit *exec.ExitError
			code := 0
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || !strings.Contains(out.String(), tt.want) {
				t.Errorf("kdelay %s: exit %d, printed:\n%s\nwant exit %d and %q", strings.Join(tt.args, " "), code, out.String(), tt.code, tt.want)
			}
		})
	}
}
