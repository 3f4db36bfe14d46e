package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// livez answers 200 while the process can serve HTTP. It never asks Kafka:
// a broker outage must not get every kdelay restarted, which would only add
// a rebalance to the outage.
func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 once this kdelay forwards, and 503 with the reason
// otherwise: while it starts, until every forwarder's group has assigned it
// its partitions, while a forwarder is stuck (forwarder.Config.StuckAfter),
// and whenever no broker answers. While it waits by design for processes of
// the per-stage layout to stop (forwarder.Forwarder.Waiting), it answers 200
// if a broker answers: a rolling deploy then goes on to stop them.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.ready(ctx); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %v\n", err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// ready is nil when the forwarder has started, each of its forwarders has
// its assignment, and a broker answers.
func (s *Server) ready(ctx context.Context) error {
	select {
	case <-s.cfg.Forwarder.Ready():
	default:
		if why := s.cfg.Forwarder.Waiting(); why != "" {
			// Ready to be left running: a rolling deploy goes on and
			// stops the old processes it waits for.
			return s.cl.Ping(ctx)
		}
		return errors.New("starting: checking topics and starting the forwarders")
	}
	for _, l := range s.cfg.Forwarder.Levels() {
		if !l.Assigned {
			return fmt.Errorf("level %s: group %s has not assigned its partitions yet", l.Level, l.Group)
		}
		if l.Stuck != "" {
			return fmt.Errorf("level %s is stuck: it %s", l.Level, l.Stuck)
		}
	}
	if err := s.cl.Ping(ctx); err != nil {
		return fmt.Errorf("no broker answers: %w", err)
	}
	return nil
}
