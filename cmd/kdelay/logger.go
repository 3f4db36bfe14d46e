package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kfake"
)

// newLoggers returns kdelay's logger and the one for the Kafka client and
// the embedded broker. Those log one level quieter than kdelay itself, since
// their info is connection churn: at log-level debug they log info, at
// trace (config.LevelTrace) debug.
//
// Both fold the repeats of a failure (see fold) into one line per interval:
// in an outage every client retries, and the few lines that say what
// happened would be lost among hundreds that say it again. flush writes the
// repeats counted last; call it once nothing more is logged.
func newLoggers(level slog.Level, format string, w io.Writer) (app, kafka *slog.Logger, flush func()) {
	causes := newCauses()
	handler := func(level slog.Level) slog.Handler {
		opts := &slog.HandlerOptions{Level: level}
		if format == "json" {
			return newFold(slog.NewJSONHandler(w, opts), causes)
		}
		return newFold(slog.NewTextHandler(w, opts), causes)
	}
	return slog.New(handler(level)), slog.New(handler(level+4)).With("component", "kafka"), causes.flush
}

// brokerLog hands the embedded broker's log lines to slog.
type brokerLog struct{ log *slog.Logger }

func (b brokerLog) Logf(level kfake.LogLevel, format string, args ...any) {
	l := slog.LevelDebug
	switch level {
	case kfake.LogLevelError:
		l = slog.LevelError
	case kfake.LogLevelWarn:
		l = slog.LevelWarn
	case kfake.LogLevelInfo:
		l = slog.LevelInfo
	}
	if ctx := context.Background(); b.log.Enabled(ctx, l) {
		b.log.Log(ctx, l, "embedded_broker", "detail", fmt.Sprintf(format, args...))
	}
}
