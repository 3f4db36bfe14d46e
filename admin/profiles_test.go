package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
