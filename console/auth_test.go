package console

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestReadCredentials(t *testing.T) {
	t.Parallel()
	const alice, bob = "Jx8kq2Vb0pXw7sLr4NcT1yZe", "Q3mN9vB6xC2zL8kJ5hG1fD4s"
	tests := []struct {
		name, file string
		want       []Credential
		err        string // in the error; "" for none
	}{
		{"a line per user, comments and blank lines skipped", "# who may act\n\nalice:" + alice + "\n  bob:" + bob + "  \n",
			[]Credential{{"alice", alice}, {"bob", bob}}, ""},
		{"a secret may hold a colon", "alice:" + alice + ":x\n", []Credential{{"alice", alice + ":x"}}, ""},
		{"no colon", "alice " + alice + "\n", nil, "line 1 is not name:secret"},
		{"no name", ":" + alice + "\n", nil, "line 1 has no name"},
		{"a short secret", "alice:hunter2\n", nil, "line 1 (alice): the secret has 7 characters; use at least 16"},
		{"a name twice", "alice:" + alice + "\nalice:" + bob + "\n", nil, "line 2 (alice): the name is another's too"},
		{"a secret twice", "alice:" + alice + "\nbob:" + alice + "\n", nil, "line 2 (bob): the secret is another's too"},
		{"nothing", "# nobody yet\n", nil, "no credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "credentials")
			if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ReadCredentials(path)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("ReadCredentials: %v, want %v", err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), path)):
				t.Fatalf("ReadCredentials: %v, %v; want an error naming %s and saying %q", got, err, path, tt.err)
			case err != nil && (strings.Contains(err.Error(), alice) || strings.Contains(err.Error(), "hunter2")):
				t.Errorf("the error %q repeats a secret", err)
			case tt.err == "" && !equalCredentials(got, tt.want):
				t.Errorf("ReadCredentials: %v, want %v", got, tt.want)
			}
		})
	}
}

func equalCredentials(a, b []Credential) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestCredentialsChecked(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	tests := []struct {
		name string
		cs   []Credential
		want string
	}{
		{"an empty secret, which an empty bearer token would match", []Credential{{"alice", ""}}, "Credentials[0] (alice): the secret has 0 characters"},
		{"a secret twice", []Credential{{"alice", "Jx8kq2Vb0pXw7sLr4NcT1yZe"}, {"bob", "Jx8kq2Vb0pXw7sLr4NcT1yZe"}}, "Credentials[1] (bob): the secret is another's too"},
	}
	for _, tt := range tests {
		if _, err := New(Config{Fleet: f.fleet, Credentials: tt.cs}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New with %s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}

// logs is a slog handler's output, safe to read while requests write it.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func TestCredentials(t *testing.T) {
	t.Parallel()
	const alice, bob = "Jx8kq2Vb0pXw7sLr4NcT1yZe", "Q3mN9vB6xC2zL8kJ5hG1fD4s"
	var log logs
	f := setup(t, true, func(c *Config) {
		c.Credentials = []Credential{{"alice", alice}, {"bob", bob}}
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	f.hop("1h", "order-7", f.now.Add(-time.Minute))
	get := func(header ...string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, f.srv.URL+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		code, page := read(t, resp)
		return code, resp.Header, page
	}
	basic := func(name, secret string) string {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth(name, secret)
		return req.Header.Get("Authorization")
	}

	t.Run("a page without credentials asks a browser to sign in", func(t *testing.T) {
		code, h, _ := get()
		if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
			t.Errorf("GET / without credentials: %d, WWW-Authenticate %q; want 401 asking for basic auth", code, h.Get("WWW-Authenticate"))
		}
	})
	refused := []struct{ name, authorization string }{
		{"a wrong secret", basic("alice", "not-alices-secret-at-all")},
		{"a user's name with another's secret", basic("alice", bob)},
		{"a wrong bearer token", "Bearer not-anyones-secret-at-all"},
	}
	for _, tt := range refused {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			if code, _, _ := get("Authorization", tt.authorization); code != http.StatusUnauthorized {
				t.Errorf("GET / with %s: %d, want 401", tt.name, code)
			}
		})
	}
	accepted := []struct{ name, authorization, user string }{
		{"basic auth", basic("alice", alice), "alice"},
		{"a bearer token", "Bearer " + bob, "bob"},
	}
	for _, tt := range accepted {
		t.Run(tt.name+" signs in its user", func(t *testing.T) {
			if code, _, page := get("Authorization", tt.authorization); code != http.StatusOK || !strings.Contains(page, "signed in as "+tt.user) {
				t.Errorf("GET / with %s: %d\n%s\nwant 200, signed in as %s", tt.name, code, page, tt.user)
			}
		})
	}
	t.Run("a user cannot act with another's token", func(t *testing.T) {
		form := url.Values{"name": {"cancel"}, "id": {"order-7"}, csrfField: {f.console.token("alice")}}
		if code, page := f.post("/command", form, "Authorization", "Bearer "+bob); code != http.StatusForbidden {
			t.Errorf("POST /command as bob with alice's token: %d\n%s\nwant 403", code, page)
		}
	})
	t.Run("an action is logged with who took it and what", func(t *testing.T) {
		form := url.Values{"name": {"cancel"}, "id": {"order-7"}, "confirm": {"yes"}, csrfField: {f.console.token("bob")}}
		if code, page := f.post("/command", form, "Authorization", "Bearer "+bob); code != http.StatusOK {
			t.Fatalf("POST /command as bob: %d\n%s", code, page)
		}
		line := ""
		for l := range strings.Lines(log.String()) {
			if strings.Contains(l, "msg=console_command ") {
				line = l
			}
		}
		for _, want := range []string{"command=cancel", "id=order-7", "user=bob", "remote=127.0.0.1:"} {
			if !strings.Contains(line, want) {
				t.Errorf("the log's console_command line is %q, want %s in it; the log:\n%s", line, want, log.String())
			}
		}
		if strings.Contains(log.String(), bob) {
			t.Errorf("the log holds bob's secret:\n%s", log.String())
		}
	})
}
