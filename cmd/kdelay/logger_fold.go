package main

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// foldInterval is how long the repeats of one cause are counted before one
// line says how many came. During a broker outage each of serve's Kafka
// clients (the forwarders', the control topic's, the scheduler's, the admin
// listener's) retries about every second for each partition it reads, each
// try a line saying the same thing; every 10s a reader still learns within
// seconds that the failure goes on, and a 30s outage takes a handful of
// lines per cause.
const foldInterval = 10 * time.Second

// fold is a slog.Handler that writes the first record of a cause at once and
// folds its repeats: at the end of each foldInterval in which it came again,
// one line with repeated=N; after an interval in which it did not, one line
// with stopped=true. Both are the cause's last record written again, so they
// read as the failure does now (franz-go's backoff has grown, another
// partition fails) and grep finds them with it. What a human reading an
// outage wants: when it started, that it goes on and how much, when it
// stopped.
//
// Only failures fold: records with an err attribute, the name kdelay and
// franz-go give the error. Other records are events that each say something
// of their own (a dead letter, a rebalance) and pass, as do debug records,
// which a user who asks for debug wants all of. Folded or not, every record
// is written in the order it came.
//
// The handlers derived by WithAttrs and WithGroup share one set of causes,
// so that the clients' loggers fold together.
type fold struct {
	next   slog.Handler
	group  string // the WithGroup prefix of this handler's attributes, "g."
	causes *causes
}

// newFold returns a fold writing to next, with causes shared among every
// handler given the same causes.
func newFold(next slog.Handler, c *causes) *fold { return &fold{next: next, causes: c} }

func (h *fold) Enabled(ctx context.Context, level slog.Level) bool { return h.next.Enabled(ctx, level) }

func (h *fold) Handle(ctx context.Context, r slog.Record) error {
	key, ok := h.key(r)
	if !ok {
		return h.next.Handle(ctx, r)
	}
	return h.causes.handle(ctx, h.next, key, r)
}

func (h *fold) WithAttrs(as []slog.Attr) slog.Handler {
	return &fold{next: h.next.WithAttrs(as), group: h.group, causes: h.causes}
}

func (h *fold) WithGroup(name string) slog.Handler {
	return &fold{next: h.next.WithGroup(name), group: h.group + name + ".", causes: h.causes}
}

// key names the cause of r: its level, message, error and broker address.
// The other attributes say where it happened (a client, group, topic,
// partition, request) and not what happened, so the same failure seen by
// every client is one cause. ok is false for a record that does not fold.
//
// The digits of the error text are masked: error texts embed numbers that
// change from one try to the next (a local port, a duration, a count) and a
// failure differing only by them is the same failure to a reader. The broker
// address stays whole, so that two brokers down are two causes where franz-go
// says which one it cannot reach.
func (h *fold) key(r slog.Record) (key string, ok bool) {
	if r.Level <= slog.LevelDebug {
		return "", false
	}
	var b strings.Builder
	b.WriteString(r.Level.String() + "\x00" + h.group + "\x00" + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "err":
			ok = true
			b.WriteString("\x00err=" + maskDigits(a.Value.String()))
		case "addr":
			b.WriteString("\x00addr=" + a.Value.String())
		}
		return true
	})
	return b.String(), ok
}

// maskDigits replaces each run of digits in s with one '#'.
func maskDigits(s string) string {
	var b strings.Builder
	digits := false
	for _, c := range s {
		isDigit := c >= '0' && c <= '9'
		if !isDigit {
			b.WriteRune(c)
		} else if !digits {
			b.WriteByte('#')
		}
		digits = isDigit
	}
	return b.String()
}
