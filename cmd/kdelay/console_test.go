package main

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kdelay/kdelay/config"
)

// TestConsole opens the web console where an operator finds it: at / on
// serve's admin listener, here with its actions on a listener off loopback,
// so behind credentials; and from kdelay console on a machine of its own,
// read-only.
func TestConsole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.levels = []string{"1s", "1h"}
	const secret = "Jx8kq2Vb0pXw7sLr4NcT1yZe"
	credentials := filepath.Join(e.dir, "console-credentials")
	if err := os.WriteFile(credentials, []byte("alice:"+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.env = []string{"KDELAY_ADMIN=0.0.0.0:0", "KDELAY_CONSOLE_ACTIONS=true", "KDELAY_CONSOLE_AUTH_FILE=" + credentials}
	s := e.serve()
	e.run(t, "send", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--target", e.target, "--delay", "1h", "later")
	pendingIn1h := regexp.MustCompile(`(?s)<table id="levels">.*?<tr data-level="1h">.*?<td class="n pending">1</td>`)

	t.Run("serve's admin listener serves it at /, with actions, to a user with credentials", func(t *testing.T) {
		m := regexp.MustCompile(`admin_listening addr=\S+:(\d+)`).FindStringSubmatch(s.out.String())
		if m == nil {
			t.Fatalf("serve did not log admin_listening with its address:\n%s", s.out)
		}
		admin := "http://127.0.0.1:" + m[1]
		if code, _ := get(t, admin+"/"); code != http.StatusUnauthorized {
			t.Errorf("GET / without credentials: %d, want 401", code)
		}
		if code, _ := get(t, admin+"/livez"); code != http.StatusOK {
			t.Errorf("GET /livez beside the console, without credentials: %d, want 200", code)
		}
		var page string
		if !eventually(20*time.Second, func() bool {
			_, page = get(t, admin+"/", "Authorization", "Bearer "+secret)
			return pendingIn1h.MatchString(page)
		}) {
			t.Fatalf("GET / on the admin listener:\n%s\nwant the 1h level with the 1 record sent pending", page)
		}
		if !strings.Contains(page, "actions on") || !strings.Contains(page, "signed in as alice") {
			t.Errorf("the admin listener with console-actions serves no actions, or not to alice:\n%s", page)
		}
		_, page = get(t, admin+"/find?id=nothing", "Authorization", "Bearer "+secret)
		token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
		if token == nil {
			t.Fatalf("the find page has no form with a CSRF token:\n%s", page)
		}
		cancel := url.Values{"name": {"cancel"}, "id": {"nothing"}, "confirm": {"yes"}}
		if code, page := post(t, admin+"/command", cancel, "Authorization", "Bearer "+secret); code != http.StatusForbidden {
			t.Errorf("POST /command without the CSRF token: %d\n%s\nwant 403", code, page)
		}
		cancel.Set("csrf", token[1])
		if code, page := post(t, admin+"/command", cancel, "Authorization", "Bearer "+secret); code != http.StatusOK || !strings.Contains(page, "Written to ") {
			t.Errorf("POST /command with the CSRF token: %d\n%s\nwant the cancel written", code, page)
		}
		if code, page := get(t, admin+"/live", "Authorization", "Bearer "+secret); code != http.StatusOK || !regexp.MustCompile(`<tr data-level="1h">`).MatchString(page) {
			t.Errorf("GET /live on the admin listener: %d\n%s\nwant a row for the 1h level of this serve", code, page)
		}
		if !eventually(5*time.Second, func() bool {
			return regexp.MustCompile(`console_command .*id=nothing .*user=alice`).MatchString(s.out.String())
		}) {
			t.Errorf("serve did not log the cancel with who wrote it:\n%s", s.out)
		}
	})
	t.Run("kdelay console serves it read-only, to a user with credentials", func(t *testing.T) {
		p := e.command("console", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--group", e.group, "--levels", "1s,1h", "--addr", "127.0.0.1:0",
			"--console-auth-file", credentials)
		out := &output{ready: make(chan string, 1)}
		p.Stdout, p.Stderr = out, out
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- p.Wait() }()
		defer func() {
			_ = p.Process.Signal(syscall.SIGINT)
			if err := <-exited; err != nil {
				t.Errorf("kdelay console after SIGINT: %v, want exit 0\n%s", err, out)
			}
		}()
		var addr []string
		if !eventually(20*time.Second, func() bool { addr = consoleLine.FindStringSubmatch(out.String()); return addr != nil }) {
			t.Fatalf("kdelay console did not say where it listens:\n%s", out)
		}
		if code, _ := get(t, "http://"+addr[1]+"/"); code != http.StatusUnauthorized {
			t.Errorf("GET / on kdelay console without credentials: %d, want 401", code)
		}
		code, page := get(t, "http://"+addr[1]+"/", "Authorization", "Bearer "+secret)
		if code != http.StatusOK || !pendingIn1h.MatchString(page) || !strings.Contains(page, "read-only") {
			t.Errorf("GET / on kdelay console: %d\n%s\nwant the 1h level with 1 pending, read-only", code, page)
		}
		code, page = post(t, "http://"+addr[1]+"/replay", url.Values{"all": {"1"}, "confirm": {"yes"}}, "Authorization", "Bearer "+secret)
		if code != http.StatusForbidden || !strings.Contains(page, "console-actions") {
			t.Errorf("POST /replay on kdelay console: %d\n%s\nwant 403 saying it is read-only and what acts", code, page)
		}
	})
}

// TestConsoleReadOnlyByDefault checks that serve's console is read-only
// unless console-actions is set, on loopback too.
func TestConsoleReadOnlyByDefault(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		actions bool
	}{{nil, false}, {[]string{"--console-actions"}, true}} {
		fs := newServe().Flags()
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(fs, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := server{cfg: cfg}.consoleConfig(nil)
		if c.Actions != tt.actions || !strings.Contains(c.ActionsHelp, "console-actions") {
			t.Errorf("serve %q on admin %s: console actions %v, help %q; want %v, naming console-actions", tt.args, cfg.Admin, c.Actions, c.ActionsHelp, tt.actions)
		}
	}
}

// consoleLine is what kdelay console prints once it listens.
var consoleLine = regexp.MustCompile(`kdelay console \(read-only\) on http://(\S+)/`)

// get answers GET addr with the status and the body; header are more
// headers, name then value.
func get(t *testing.T, addr string, header ...string) (int, string) {
	t.Helper()
	return do(t, http.MethodGet, addr, nil, header...)
}

// post posts form to addr as a page of the console does: same origin.
func post(t *testing.T, addr string, form url.Values, header ...string) (int, string) {
	t.Helper()
	return do(t, http.MethodPost, addr, form, append(header, "Content-Type", "application/x-www-form-urlencoded", "Sec-Fetch-Site", "same-origin")...)
}

func do(t *testing.T, method, addr string, form url.Values, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, addr, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
