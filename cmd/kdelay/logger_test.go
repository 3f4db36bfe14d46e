package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/kdelay/kdelay/config"
)

// TestKafkaLogLevels: the Kafka client logs one level quieter than kdelay,
// and at log-level trace it logs its own debug lines (franz-go asks its
// logger's level before it writes any).
func TestKafkaLogLevels(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		level      slog.Level
		app        slog.Level // the quietest level kdelay logs
		kafka      kgo.LogLevel
		kafkaDebug bool
	}{
		{"info", slog.LevelInfo, slog.LevelInfo, kgo.LogLevelWarn, false},
		{"debug", slog.LevelDebug, slog.LevelDebug, kgo.LogLevelInfo, false},
		{"trace", config.LevelTrace, slog.LevelDebug, kgo.LogLevelDebug, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			app, kafka, _ := newLoggers(tt.level, "text", io.Discard)
			if !app.Enabled(t.Context(), tt.app) {
				t.Errorf("kdelay does not log at %v", tt.app)
			}
			if got := kslog.New(kafka).Level(); got != tt.kafka {
				t.Errorf("the Kafka client logs at %v, want %v", got, tt.kafka)
			}
			if got := kafka.Enabled(t.Context(), slog.LevelDebug); got != tt.kafkaDebug {
				t.Errorf("the Kafka client's debug lines enabled %v, want %v", got, tt.kafkaDebug)
			}
		})
	}
}
