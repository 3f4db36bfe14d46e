package admin

import (
	"net"
	"net/http"
	"net/http/pprof"
)

// profiles serves the Go runtime's profiles (net/http/pprof) under
// /debug/pprof/, so that a leak or a hot loop is found from the process that
// shows it: `go tool pprof http://127.0.0.1:9464/debug/pprof/heap`.
//
// Only to connections from loopback: the listener may be opened to every
// interface for Prometheus and the kubelet, and a profile shows the
// program's stacks and the command line. kubectl port-forward and an SSH
// tunnel arrive on loopback, so an operator still reaches it.
func profiles(mux *http.ServeMux) {
	for path, h := range map[string]http.HandlerFunc{
		"/debug/pprof/":        pprof.Index, // and each named profile: heap, goroutine, allocs...
		"/debug/pprof/cmdline": pprof.Cmdline,
		"/debug/pprof/profile": pprof.Profile,
		"/debug/pprof/symbol":  pprof.Symbol,
		"/debug/pprof/trace":   pprof.Trace,
	} {
		mux.Handle(path, loopbackOnly(h))
	}
}

// loopbackOnly answers 403 to a request that did not come from loopback.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			http.Error(w, "profiles are served to loopback only: reach this port through kubectl port-forward or an SSH tunnel", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
