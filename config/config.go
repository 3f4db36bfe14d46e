// Package config loads kdelay's settings from a YAML file, KDELAY_*
// environment variables and command-line flags, and checks all of them
// before anything starts.
//
// Every setting has one flat, hyphenated name used everywhere:
//
//	check-interval: 100ms              # YAML file (--config kdelay.yaml)
//	KDELAY_CHECK_INTERVAL=100ms        # environment
//	--check-interval 100ms             # flag
//
// A flag overrides the environment, which overrides the file, which overrides
// the default. Lists are YAML lists in the file and comma-separated text
// elsewhere; durations are Go durations. Only package main imports config:
// it maps a Config onto each component's own Config.
package config

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

const (
	// EnvPrefix starts the environment variable of every setting.
	EnvPrefix = "KDELAY_"

	// FlagConfig is the flag naming the YAML file; EnvConfig is its
	// environment variable, read when the flag is not given.
	FlagConfig = "config"
	EnvConfig  = EnvPrefix + "CONFIG"

	// DefaultListen is where the embedded broker listens by default, and so
	// where send and tail connect with no settings.
	DefaultListen = "127.0.0.1:9092"

	// DefaultEmbeddedRetention is retention's default on the embedded
	// broker. There every record kept costs memory until it expires (the
	// broker's index of it), so Kafka's week would bound that only at a
	// seventh of the rate. A day still keeps delivered records and dead
	// letters long enough for someone to read or replay them the next day;
	// records still pending are kept however old (see cmd/kdelay's
	// retention).
	DefaultEmbeddedRetention = 24 * time.Hour
)

// defaultRetention is retention's default: forwarder's, Kafka's own 7 days,
// on a cluster; DefaultEmbeddedRetention on the embedded broker.
func defaultRetention(embedded bool) time.Duration {
	if embedded {
		return DefaultEmbeddedRetention
	}
	return forwarder.DefaultRetention
}

// Config is kdelay's checked configuration. The comment of each field names
// its key; the defaults are listed by `kdelay serve --help`.
type Config struct {
	Brokers           []string      // brokers: seed brokers; empty runs an embedded broker
	Listen            string        // listen: host:port of the embedded broker
	DataDir           string        // data-dir: where the embedded broker keeps its data
	TopicPrefix       string        // topic-prefix
	Levels            levels.Set    // levels, sorted by delay
	Partitions        int32         // partitions of created topics
	ReplicationFactor int16         // replication-factor; -1 for the broker's default
	Retention         time.Duration // retention; empty is defaultRetention
	RetentionHeadroom time.Duration // retention-headroom
	Group             string        // group: the consumer group of every stage
	Mode              string        // mode: "exact" or "poll"
	CheckInterval     time.Duration // check-interval
	FetchMaxWait      time.Duration // fetch-max-wait
	IdleFetchMaxWait  time.Duration // idle-fetch-max-wait
	MaxBufferedBytes  int64         // max-buffered-bytes
	MaxDelay          time.Duration // max-delay
	DeliveryTimeout   time.Duration // delivery-timeout
	Delivery          string        // delivery: "at-least-once" or "exactly-once"
	CommitInterval    time.Duration // commit-interval
	CommitLinger      time.Duration // commit-linger
	ScheduleLookahead time.Duration // schedule-lookahead
	StuckAfter        time.Duration // stuck-after
	SessionTimeout    time.Duration // session-timeout
	InstanceID        string        // instance-id; "" for the host name
	ShutdownTimeout   time.Duration // shutdown-timeout
	Admin             string        // admin: host:port of the admin listener; "" for none
	ConsoleActions    bool          // console-actions: the web console may act
	ConsoleAuthFile   string        // console-auth-file: credentials the web console asks for; "" for none
	Tracing           bool          // tracing: export OpenTelemetry spans
	TracingEndpoint   string        // tracing-endpoint: OTLP/HTTP collector URL; "" for the OTEL_* variables' or the exporter's default
	LogLevel          slog.Level    // log-level; LevelTrace for trace
	LogFormat         string        // log-format: "text" or "json"

	// TLS is the tls-* settings, nil when tls is false; SASL is the sasl-*
	// settings, nil when sasl-mechanism is empty. ClientOpts gives them to
	// a Kafka client.
	TLS  *tls.Config
	SASL sasl.Mechanism
	// security is the tls and sasl settings as KDELAY_* variables, for a
	// child process: see SecurityEnviron.
	security []string

	File string // the YAML file read, "" when none
}

// Embedded reports whether no brokers are configured, so kdelay runs its own.
func (c Config) Embedded() bool { return len(c.Brokers) == 0 }

// Seeds are the brokers a client connects to: the configured ones, or the
// embedded broker's listen address.
func (c Config) Seeds() []string {
	if c.Embedded() {
		return []string{c.Listen}
	}
	return c.Brokers
}

// Load reads the file named by --config (or KDELAY_CONFIG), the KDELAY_*
// variables in environ and the flags set in fs, which must have been added
// by AddFlags or AddClientFlags and parsed. Keys with no flag in fs can still
// be set by the file and the environment. Every problem found is reported,
// each naming its key, where the value came from and how to fix it.
// Environment variables that name no key are ignored.
func Load(fs *pflag.FlagSet, environ []string) (Config, error) {
	l := loader{k: koanf.New("."), from: map[string]string{}}
	if err := l.load(confmap.Provider(defaults(), ""), nil, func(string) string { return "" }); err != nil {
		return Config{}, err
	}
	path := configPath(fs, environ)
	if path != "" {
		if err := l.loadFile(path); err != nil {
			return Config{}, err
		}
	}
	vars := env.Provider(".", env.Opt{Prefix: EnvPrefix, TransformFunc: func(k, v string) (string, any) {
		return keyOfEnv(k), v
	}, EnvironFunc: func() []string { return environ }})
	if err := l.load(vars, nil, envName); err != nil {
		return Config{}, err
	}
	// Only the flags AddFlags made: a command's own flag of the same name,
	// such as bench's --brokers, is not a setting of this package.
	flags := posflag.ProviderWithFlag(fs, ".", nil, func(f *pflag.Flag) (string, any) {
		if _, ok := f.Value.(*flagValue); !ok {
			return "", nil
		}
		return f.Name, f.Value.String()
	})
	if err := l.load(flags, nil, func(k string) string { return "--" + k }); err != nil {
		return Config{}, err
	}
	c, err := l.decode()
	c.File = path
	return c, err
}

// configPath is --config when given, else KDELAY_CONFIG.
func configPath(fs *pflag.FlagSet, environ []string) string {
	if f := fs.Lookup(FlagConfig); f != nil && f.Changed {
		return f.Value.String()
	}
	for _, kv := range slices.Backward(environ) {
		if v, ok := strings.CutPrefix(kv, EnvConfig+"="); ok {
			return v
		}
	}
	return ""
}

// loader merges the sources in order of precedence, remembering which one
// set each key so that an error can say where to fix it.
type loader struct {
	k       *koanf.Koanf
	from    map[string]string // key → flag, variable or file that set it; "" for the default
	unknown []error           // keys of the file kdelay does not know
}

func (l *loader) load(p koanf.Provider, parser koanf.Parser, source func(key string) string) error {
	layer := koanf.New(".")
	if err := layer.Load(p, parser); err != nil {
		return err
	}
	return l.merge(layer, source)
}

func (l *loader) merge(layer *koanf.Koanf, source func(key string) string) error {
	for _, name := range layer.Keys() {
		l.from[name] = source(name)
	}
	return l.k.Merge(layer)
}

// loadFile loads the YAML file at path. It records the keys kdelay does not
// know, for Load to refuse: a misspelt key would otherwise be ignored and its
// default used silently. It merges the others, so that one error reports
// their bad values too and a user fixes the file in one go.
func (l *loader) loadFile(path string) error {
	layer := koanf.New(".")
	if err := layer.Load(file.Provider(path), yaml.Parser()); err != nil {
		return fmt.Errorf("config file %s: %w; fix the file or the path given to --%s or %s", path, err, FlagConfig, EnvConfig)
	}
	var unknown []string
	for name := range layer.Raw() {
		if _, ok := lookup(name); !ok {
			unknown = append(unknown, name)
			layer.Delete(name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		l.unknown = append(l.unknown, fmt.Errorf("config file %s: unknown key %q; %s", path, name, suggest(name)))
	}
	return l.merge(layer, func(string) string { return path })
}

// suggest names the known keys closest to a misspelt one.
func suggest(name string) string {
	var names []string
	for _, k := range keys() {
		names = append(names, k.name)
	}
	near := Closest(name, names)
	if len(near) == 0 {
		return "remove it; kdelay serve --help lists the keys"
	}
	for i, n := range near {
		near[i] = strconv.Quote(n)
	}
	return "did you mean " + strings.Join(near, " or ") + "?"
}

// LevelTrace is log-level trace: kdelay's debug lines and the Kafka
// client's and the embedded broker's own, which log one level quieter
// than kdelay, so at debug only down to their info.
const LevelTrace = slog.LevelDebug - 4
