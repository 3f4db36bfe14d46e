package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// The tests in this file run in a synctest bubble: time.Now and the fold's
// timer read the bubble's clock, which moves only when every goroutine
// waits, so a time.Sleep there is the clock moving, not a wait for another
// goroutine, and every line's time is known to the millisecond.

// logEntry is one log line: logged by a step of a test, or wanted in its
// output. at is its time after the start of the bubble.
type logEntry struct {
	at    time.Duration
	level slog.Level
	msg   string
	args  []any
	kafka bool // through the Kafka logger, which adds component=kafka
}

// sinceStart is a time attribute, as a time after the start of the bubble.
type sinceStart time.Duration

// repeated is the line that says e came n more times in the interval that
// ended at at.
func (e logEntry) repeated(at time.Duration, n int, interval time.Duration) logEntry {
	e.at, e.args = at, append(e.args[:len(e.args):len(e.args)], "repeated", n, "interval", interval)
	return e
}

// stopped is the line that says e stopped, after total times, the last at
// last.
func (e logEntry) stopped(at time.Duration, total int, last time.Duration) logEntry {
	e.at, e.args = at, append(e.args[:len(e.args):len(e.args)], "stopped", true, "total", total, "last_seen", sinceStart(last))
	return e
}

// with is e again, at at, with args instead of its own.
func (e logEntry) with(at time.Duration, args ...any) logEntry {
	e.at, e.args = at, args
	return e
}

var (
	connRefused = errors.New("dial tcp 127.0.0.1:9092: connect: connection refused")
	fetchFailed = logEntry{level: slog.LevelWarn, msg: "fetch_failed", args: []any{"partition", 0, "err", connRefused}}
	dialFailed  = logEntry{level: slog.LevelWarn, msg: "unable to open connection to broker", kafka: true,
		args: []any{"addr", "127.0.0.1:9092", "broker", "seed_0", "err", connRefused}}
)

// logEvery is e logged every step from from until to, to excluded.
func logEvery(e logEntry, from, to, step time.Duration) []logEntry {
	var es []logEntry
	for at := from; at < to; at += step {
		es = append(es, e.with(at, e.args...))
	}
	return es
}

func TestFold(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		logged  []logEntry
		flushAt time.Duration // 0: after the end, once every interval is over
		want    []logEntry
	}{
		{name: "first line passes at once",
			logged: []logEntry{fetchFailed},
			want:   []logEntry{fetchFailed}},
		{name: "repeats fold into a count, then one stopped line, as the last one",
			logged: append([]logEntry{fetchFailed}, logEvery(fetchFailed.with(0, "partition", 1, "err", connRefused), time.Second, 5*time.Second, time.Second)...),
			want: []logEntry{fetchFailed, fetchFailed.with(0, "partition", 1, "err", connRefused).repeated(10*time.Second, 4, 10*time.Second),
				fetchFailed.with(0, "partition", 1, "err", connRefused).stopped(20*time.Second, 5, 4*time.Second)}},
		{name: "a cause that goes on gets a count per interval",
			logged: logEvery(fetchFailed, 0, 25*time.Second, 3*time.Second),
			want: []logEntry{fetchFailed, fetchFailed.repeated(10*time.Second, 3, 10*time.Second), fetchFailed.repeated(20*time.Second, 3, 10*time.Second),
				fetchFailed.repeated(30*time.Second, 2, 10*time.Second), fetchFailed.stopped(40*time.Second, 9, 24*time.Second)}},
		{name: "other message, error or level is another cause",
			logged: []logEntry{fetchFailed, fetchFailed.with(0, "err", errors.New("NOT_LEADER_FOR_PARTITION")),
				{level: slog.LevelWarn, msg: "commit_failed", args: []any{"err", connRefused}}, {level: slog.LevelError, msg: "fetch_failed", args: []any{"err", connRefused}}},
			want: []logEntry{fetchFailed, fetchFailed.with(0, "err", errors.New("NOT_LEADER_FOR_PARTITION")),
				{level: slog.LevelWarn, msg: "commit_failed", args: []any{"err", connRefused}}, {level: slog.LevelError, msg: "fetch_failed", args: []any{"err", connRefused}}}},
		{name: "errors differing only in numbers are one cause",
			logged: []logEntry{fetchFailed.with(0, "err", "read tcp 127.0.0.1:51234->127.0.0.1:9092: connection reset by peer"),
				fetchFailed.with(time.Second, "err", "read tcp 127.0.0.1:51288->127.0.0.1:9092: connection reset by peer")},
			want: []logEntry{fetchFailed.with(0, "err", "read tcp 127.0.0.1:51234->127.0.0.1:9092: connection reset by peer"),
				fetchFailed.with(0, "err", "read tcp 127.0.0.1:51288->127.0.0.1:9092: connection reset by peer").repeated(10*time.Second, 1, 10*time.Second),
				fetchFailed.with(0, "err", "read tcp 127.0.0.1:51288->127.0.0.1:9092: connection reset by peer").stopped(20*time.Second, 2, time.Second)}},
		{name: "the clients of one broker fold, two brokers do not",
			logged: []logEntry{dialFailed, dialFailed.with(0, "addr", "127.0.0.1:9092", "broker", "1", "err", connRefused),
				dialFailed.with(0, "addr", "127.0.0.1:9093", "broker", "2", "err", connRefused)},
			want: []logEntry{dialFailed, dialFailed.with(0, "addr", "127.0.0.1:9093", "broker", "2", "err", connRefused),
				dialFailed.with(0, "addr", "127.0.0.1:9092", "broker", "1", "err", connRefused).repeated(10*time.Second, 1, 10*time.Second),
				dialFailed.with(0, "addr", "127.0.0.1:9092", "broker", "1", "err", connRefused).stopped(20*time.Second, 2, 0)}},
		{name: "records without an error pass",
			logged: logEvery(logEntry{level: slog.LevelWarn, msg: "dead_letter", args: []any{"source", "kdelay.ingress/0/1", "reason", "no target"}}, 0, 3*time.Second, time.Second),
			want:   logEvery(logEntry{level: slog.LevelWarn, msg: "dead_letter", args: []any{"source", "kdelay.ingress/0/1", "reason", "no target"}}, 0, 3*time.Second, time.Second)},
		{name: "debug records pass",
			logged: logEvery(logEntry{level: slog.LevelDebug, msg: "retrying", args: []any{"err", connRefused}}, 0, 3*time.Second, time.Second),
			want:   logEvery(logEntry{level: slog.LevelDebug, msg: "retrying", args: []any{"err", connRefused}}, 0, 3*time.Second, time.Second)},
		{name: "a cause back after it stopped is first again",
			logged: []logEntry{fetchFailed, fetchFailed.with(time.Second, fetchFailed.args...), fetchFailed.with(25*time.Second, fetchFailed.args...)},
			want: []logEntry{fetchFailed, fetchFailed.repeated(10*time.Second, 1, 10*time.Second), fetchFailed.stopped(20*time.Second, 2, time.Second),
				fetchFailed.with(25*time.Second, fetchFailed.args...)}},
		{name: "flush writes the count so far, then every record passes",
			logged:  []logEntry{fetchFailed, fetchFailed.with(time.Second, fetchFailed.args...), fetchFailed.with(2*time.Second, fetchFailed.args...), fetchFailed.with(6*time.Second, fetchFailed.args...)},
			flushAt: 5 * time.Second,
			want:    []logEntry{fetchFailed, fetchFailed.repeated(5*time.Second, 2, 5*time.Second), fetchFailed.with(6*time.Second, fetchFailed.args...)}},
	}
	for _, format := range []string{"text", "json"} {
		for _, tc := range cases {
			t.Run(format+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				synctest.Test(t, func(t *testing.T) {
					start := time.Now()
					got := logAll(format, tc.logged, tc.flushAt)
					if want := renderLog(t, format, start, tc.want); got != want {
						t.Errorf("logged:\n%s\nwant:\n%s", got, want)
					}
				})
			})
		}
	}
}

// logAll logs each entry at its time, through the loggers of newLoggers in
// format, and returns what they wrote. It flushes at flushAt, or with 0 once
// every interval is over.
func logAll(format string, logged []logEntry, flushAt time.Duration) string {
	start := time.Now()
	var out bytes.Buffer
	app, kafka, flush := newLoggers(slog.LevelDebug, format, &out)
	flushed := false
	for _, e := range logged {
		if flushAt > 0 && !flushed && e.at >= flushAt {
			time.Sleep(time.Until(start.Add(flushAt)))
			flush()
			flushed = true
		}
		time.Sleep(time.Until(start.Add(e.at)))
		l := app
		if e.kafka {
			l = kafka
		}
		l.Log(context.Background(), e.level, e.msg, e.args...)
	}
	time.Sleep(3 * foldInterval)
	flush()
	return out.String()
}

// renderLog writes es as slog's own handler in format writes them.
func renderLog(t *testing.T, format string, start time.Time, es []logEntry) string {
	var b bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	var h slog.Handler = slog.NewTextHandler(&b, opts)
	if format == "json" {
		h = slog.NewJSONHandler(&b, opts)
	}
	for _, e := range es {
		r := slog.NewRecord(start.Add(e.at), e.level, e.msg, 0)
		for i := 0; i < len(e.args); i += 2 {
			v := e.args[i+1]
			if s, ok := v.(sinceStart); ok {
				v = start.Add(time.Duration(s))
			}
			r.Add(e.args[i], v)
		}
		h := h
		if e.kafka {
			h = h.WithAttrs([]slog.Attr{slog.String("component", "kafka")})
		}
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// TestFoldConcurrent has many clients fail at once, as they do when the
// broker goes away: one line, then one count, then one stopped line.
func TestFoldConcurrent(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var got bytes.Buffer
		_, kafka, flush := newLoggers(slog.LevelInfo, "text", &got)
		const clients, tries = 20, 50
		var wg sync.WaitGroup
		for c := range clients {
			wg.Go(func() {
				l := kafka.With("client", c)
				for range tries {
					l.Warn("unable to open connection to broker", "addr", "127.0.0.1:9092", "err", connRefused)
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		time.Sleep(3 * foldInterval)
		flush()
		lines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
		want := []string{"", fmt.Sprintf("repeated=%d interval=10s", clients*tries-1), fmt.Sprintf("stopped=true total=%d", clients*tries)}
		if len(lines) != len(want) {
			t.Fatalf("%d clients failing %d times logged %d lines, want %d:\n%s", clients, tries, len(lines), len(want), got.String())
		}
		for i, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d is %q, want it to hold %q", i, lines[i], w)
			}
		}
	})
}
