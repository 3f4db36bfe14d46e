package config

import (
	"log/slog"
	"strconv"
	"strings"

	units "github.com/docker/go-units"

	"github.com/kdelay/kdelay"
)

// Redacted stands for a secret's value wherever kdelay writes settings.
const Redacted = "[redacted]"

// LogValue is the effective configuration, one attribute per key in the
// order of --help, with secrets written as Redacted: kdelay serve logs it at
// start, so that what a process runs with is never a guess. The tls-* and
// sasl-* keys appear only when set; "file" is the YAML file read.
func (c Config) LogValue() slog.Value {
	security := map[string]string{}
	for _, kv := range c.security {
		env, v, _ := strings.Cut(kv, "=")
		name := keyOfEnv(env)
		if isSecret(name) {
			v = Redacted
		}
		security[name] = v
	}
	attrs := []slog.Attr{slog.String("file", c.File)}
	for _, k := range keys() {
		if !isSecurity(k.name) {
			attrs = append(attrs, slog.String(k.name, c.text(k.name)))
		} else if v, ok := security[k.name]; ok {
			attrs = append(attrs, slog.String(k.name, v))
		}
	}
	return slog.GroupValue(attrs...)
}

// text is the value of a key that is not a tls or sasl setting, written as
// a user would write it.
func (c Config) text(name string) string {
	d := kdelay.DurationText
	switch name {
	case "brokers":
		return strings.Join(c.Brokers, ",")
	case "listen":
		return c.Listen
	case "data-dir":
		return c.DataDir
	case "topic-prefix":
		return c.TopicPrefix
	case "levels":
		return strings.Join(c.Levels.Names(), ",")
	case "partitions":
		return strconv.Itoa(int(c.Partitions))
	case "replication-factor":
		return strconv.Itoa(int(c.ReplicationFactor))
	case "retention":
		return d(c.Retention)
	case "retention-headroom":
		return d(c.RetentionHeadroom)
	case "group":
		return c.Group
	case "mode":
		return c.Mode
	case "check-interval":
		return d(c.CheckInterval)
	case "fetch-max-wait":
		return d(c.FetchMaxWait)
	case "idle-fetch-max-wait":
		return d(c.IdleFetchMaxWait)
	case "max-buffered-bytes":
		return units.BytesSize(float64(c.MaxBufferedBytes))
	case "max-delay":
		return d(c.MaxDelay)
	case "delivery-timeout":
		return d(c.DeliveryTimeout)
	case "delivery":
		return c.Delivery
	case "commit-interval":
		return d(c.CommitInterval)
	case "commit-linger":
		return d(c.CommitLinger)
	case "schedule-lookahead":
		return d(c.ScheduleLookahead)
	case "stuck-after":
		return d(c.StuckAfter)
	case "session-timeout":
		return d(c.SessionTimeout)
	case "instance-id":
		return c.InstanceID
	case "shutdown-timeout":
		return d(c.ShutdownTimeout)
	case "admin":
		return c.Admin
	case "console-actions":
		return strconv.FormatBool(c.ConsoleActions)
	case "console-auth-file":
		return c.ConsoleAuthFile
	case "tracing":
		return strconv.FormatBool(c.Tracing)
	case "tracing-endpoint":
		// Never a secret: decode refuses a user, a password or a query.
		return c.TracingEndpoint
	case "log-level":
		if c.LogLevel == LevelTrace {
			return "trace"
		}
		return strings.ToLower(c.LogLevel.String())
	case "log-format":
		return c.LogFormat
	}
	panic("config: Config.text has no case for key " + name)
}
