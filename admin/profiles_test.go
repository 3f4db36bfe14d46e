package admin

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProfiles(t *testing.T) {
	t.Parallel()
	t.Run("served on the listener to loopback", func(t *testing.T) {
		fx := setup(t)
		fx.run(fx.srv.Run)
		for path, want := range map[string]string{
			"/debug/pprof/heap?debug=1":      "heap profile",
			"/debug/pprof/goroutine?debug=1": "goroutine profile",
			"/debug/pprof/":                  "allocs",
		} {
			if code, body := fx.get(path); code != http.StatusOK || !strings.Contains(body, want) {
				t.Errorf("GET %s = %d, body without %q (first bytes %.80q)", path, code, want, body)
			}
		}
	})
	t.Run("refused to any other address", func(t *testing.T) {
		ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
		for remote, want := range map[string]int{
			"127.0.0.1:40000":  http.StatusOK,
			"[::1]:40000":      http.StatusOK,
			"10.1.2.3:40000":   http.StatusForbidden,
			"[2001:db8::1]:80": http.StatusForbidden,
			"garbage":          http.StatusForbidden,
		} {
			r := httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil)
			r.RemoteAddr = remote
			w := httptest.NewRecorder()
			loopbackOnly(ok).ServeHTTP(w, r)
			if w.Code != want {
				t.Errorf("a profile asked from %s answered %d, want %d", remote, w.Code, want)
			}
		}
	})
}

// TestStopDuringProfile: a stop of kdelay serve while a CPU profile is being
// taken (go tool pprof asks for 30 s) is a clean stop. The listener waited
// for the request up to its shutdown timeout and then failed Run, and kdelay
// serve exited 1 with "context deadline exceeded".
func TestStopDuringProfile(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fx.srv.Run(ctx) }()
	fx.waitStatus("/livez", http.StatusOK, 10*time.Second)
	profiled := make(chan error, 1)
	go func() {
		resp, err := http.Get("http://" + fx.srv.Addr() + "/debug/pprof/profile?seconds=60")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		profiled <- err
	}()
	// The profile is being taken once its handler's goroutine shows.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, body := fx.get("/debug/pprof/goroutine?debug=2"); strings.Contains(body, "net/http/pprof.Profile") {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the CPU profile's handler never ran")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run stopped during a profile = %v, want nil (a clean stop)", err)
		}
	case <-time.After(shutdownTimeout + 10*time.Second):
		t.Fatal("Run did not return after its context ended during a profile")
	}
	select {
	case <-profiled:
	case <-time.After(10 * time.Second):
		t.Error("the profile's request still runs after Run returned")
	}
}
