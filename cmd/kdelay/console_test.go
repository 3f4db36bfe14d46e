package main

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConsole opens the web console where an operator finds it: at / on
// serve's admin listener, with its actions since that listens on loopback,
// and from kdelay console on a machine of its own, read-only.
func TestConsole(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.levels = []string{"1s", "1h"}
	s := e.serve()
	e.run(t, "send", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--target", e.target, "--delay", "1h", "later")
	pendingIn1h := regexp.MustCompile(`(?s)<table id="levels">.*?<tr data-level="1h">.*?<td class="n pending">1</td>`)

	t.Run("serve's admin listener serves it at /, with actions on loopback", func(t *testing.T) {
		addr := regexp.MustCompile(`admin_listening addr=(\S+)`).FindStringSubmatch(s.out.String())
		if addr == nil {
			t.Fatalf("serve did not log admin_listening with its address:\n%s", s.out)
		}
		var page string
		if !eventually(20*time.Second, func() bool { _, page = get(t, "http://"+addr[1]+"/"); return pendingIn1h.MatchString(page) }) {
			t.Fatalf("GET / on the admin listener:\n%s\nwant the 1h level with the 1 record sent pending", page)
		}
		if !strings.Contains(page, "actions on") {
			t.Errorf("the admin listener on loopback serves a read-only console")
		}
		if code, _ := get(t, "http://"+addr[1]+"/livez"); code != http.StatusOK {
			t.Errorf("GET /livez beside the console: %d, want 200", code)
		}
	})
	t.Run("kdelay console serves it read-only", func(t *testing.T) {
		p := e.command("console", "--brokers", s.brokers, "--topic-prefix", e.prefix, "--group", e.group, "--levels", "1s,1h", "--addr", "127.0.0.1:0")
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
		code, page := get(t, "http://"+addr[1]+"/")
		if code != http.StatusOK || !pendingIn1h.MatchString(page) || !strings.Contains(page, "read-only") {
			t.Errorf("GET / on kdelay console: %d\n%s\nwant the 1h level with 1 pending, read-only", code, page)
		}
		resp, err := http.PostForm("http://"+addr[1]+"/replay", url.Values{"all": {"1"}, "confirm": {"yes"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("POST /replay on kdelay console: %d, want 403: it is read-only", resp.StatusCode)
		}
	})
}

// consoleLine is what kdelay console prints once it listens.
var consoleLine = regexp.MustCompile(`kdelay console \(read-only\) on http://(\S+)/`)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
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
