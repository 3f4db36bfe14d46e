package config

import (
	units "github.com/docker/go-units"

	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
	"github.com/kdelay/kdelay/schedule"
)

// kind is how a key's value is written: every source gives text (YAML may
// also give numbers and lists), and decode turns it into the field's type.
type kind string

const (
	kindString   kind = "string"
	kindList     kind = "strings"  // YAML list, or comma-separated
	kindDuration kind = "duration" // Go duration: 100ms, 1h30m
	kindInt      kind = "int"
	kindSize     kind = "size" // bytes: 64MiB, 1GiB, 67108864
	kindBool     kind = "bool" // true or false; a flag given alone is true
)

// key is one setting. Its name is the YAML key and the flag; the environment
// variable is KDELAY_ and the name in upper case with underscores.
type key struct {
	name  string
	kind  kind
	def   string // the default, written as a user would write it
	usage string
}

// keys lists every setting, in the order of --help and of
// docs/CONFIGURATION.md (TestKeysDocumented keeps them in step). The defaults
// of settings the library has too are the library's own, so that kdelay
// serve and a program using package forwarder behave alike.
func keys() []key {
	return slices.Concat([]key{
		{"brokers", kindList, "", "Kafka seed brokers, host:port, comma-separated; empty runs an embedded broker"},
		{"listen", kindString, DefaultListen, "host:port the embedded broker listens on and advertises"},
		{"data-dir", kindString, "./kdelay-data", "directory where the embedded broker keeps its data, so pending records survive a restart"},
		{"topic-prefix", kindString, kdelay.DefaultPrefix, "prefix of kdelay's topics: <prefix>.ingress, <prefix>.level.<delay>, <prefix>.dlq"},
	}, securityKeys(), []key{
		{"levels", kindList, strings.Join(levels.Default().Names(), ","), "delay levels, Go durations, comma-separated"},
		{"partitions", kindInt, strconv.Itoa(int(forwarder.DefaultPartitions)), "partitions of the topics kdelay creates"},
		{"replication-factor", kindInt, strconv.Itoa(int(forwarder.DefaultReplicationFactor)), "replication factor of the topics kdelay creates; -1 uses the broker's default"},
		{"retention", kindDuration, "", "retention.ms of the topics kdelay creates, and on the embedded broker of those it creates on first use; at least the largest level plus retention-headroom; empty is " +
			kdelay.DurationText(defaultRetention(false)) + ", or " + kdelay.DurationText(defaultRetention(true)) + " on the embedded broker"},
		{"retention-headroom", kindDuration, kdelay.DurationText(forwarder.DefaultRetentionHeadroom), "how much longer than its level a level topic must keep records: how long kdelay may be down"},
		{"group", kindString, forwarder.DefaultGroup, "the consumer group every stage is read with; kdelay processes sharing it share the work"},
		{"mode", kindString, string(forwarder.DefaultMode), "how levels watch their heads: exact (wake when due) or poll (every check-interval, like RocketMQ)"},
		{"check-interval", kindDuration, kdelay.DurationText(forwarder.DefaultCheckInterval), "the tick of poll mode; exact mode wakes when a head is due or a record arrives"},
		{"fetch-max-wait", kindDuration, kdelay.DurationText(forwarder.DefaultFetchMaxWait), "longest a fetch waits for new records"},
		{"idle-fetch-max-wait", kindDuration, kdelay.DurationText(forwarder.DefaultIdleFetchMaxWait), "longest a fetch waits for new records while no forwarder may need one at once; not below fetch-max-wait"},
		{"max-buffered-bytes", kindSize, units.BytesSize(float64(forwarder.DefaultMaxBufferedBytes)),
			"bytes of records kdelay holds in memory, with the schedules' index: half reserved equally by the ingress and each level, a quarter lent to those whose records are due, a quarter left for the garbage collector; a burst beyond that is delivered at the broker's pace"},
		{"max-delay", kindDuration, kdelay.DurationText(kdelay.DefaultMaxDelay),
			"longest delay accepted (the default is " + days(kdelay.DefaultMaxDelay) + "); longer ones go to the dead-letter topic"},
		{"delivery-timeout", kindDuration, kdelay.DurationText(forwarder.DefaultDeliveryTimeout), "how long a record may keep failing with a retryable error before it goes to the dead-letter topic with the last error"},
		{"delivery", kindString, string(forwarder.DefaultDelivery),
			"at-least-once (a crash may repeat a commit-interval of records), or exactly-once (each record once to read_committed consumers, visible when its transaction commits, commit-linger after its first record)"},
		{"commit-interval", kindDuration, kdelay.DurationText(forwarder.DefaultCommitInterval), "how often forwarded offsets are committed; a crash repeats at most this much work"},
		{"commit-linger", kindDuration, kdelay.DurationText(forwarder.DefaultCommitLinger), "exactly-once: how long after its first record a transaction begins to commit, what it adds to a delivery's lateness; at most commit-interval"},
		{"schedule-lookahead", kindDuration, kdelay.DurationText(schedule.DefaultLookahead), "how long before its time an occurrence of a recurring schedule is written into the ingress: a restart or a partition moving within it delays no occurrence; a replace or delete cancels those written and not yet due; at most max-delay"},
		{"stuck-after", kindDuration, kdelay.DurationText(forwarder.DefaultStuckAfter), "how long a level may hold a record past its due time while handing none on before /readyz answers 503 and kdelay_stuck says why; a backlog that moves is late, not stuck"},
		{"session-timeout", kindDuration, kdelay.DurationText(forwarder.DefaultSessionTimeout), "how long the group waits for a kdelay that stopped answering before giving its partitions to the others"},
		{"instance-id", kindString, "", "this process's name in kdelay's consumer groups (static membership): a kdelay restarted with the same one resumes its partitions at once; unique per process sharing the group, stable across restarts; empty is the host name (the pod name in Kubernetes)"},
		{"shutdown-timeout", kindDuration, kdelay.DurationText(forwarder.DefaultShutdownTimeout), "how long a clean stop may take: handing held records back, in-flight produces, the last commit"},
		{"admin", kindString, admin.DefaultAddr, "host:port of the admin HTTP listener: /metrics (Prometheus), /livez, /readyz, /debug/pprof/ (to loopback only); :9464 listens on every interface; empty turns it off"},
		{"console-actions", kindBool, "false", "let the web console at / on the admin listener replay dead letters and cancel, reschedule or run messages now; false keeps it read-only; with admin not on loopback, console-auth-file is required"},
		{"console-auth-file", kindString, "", "file of the credentials the web console asks for, a line per user, name:secret (basic auth, or the secret as a bearer token); empty asks for none"},
		{"tracing", kindBool, "false", "export OpenTelemetry spans of every record kdelay receives and publishes, over OTLP/HTTP to tracing-endpoint; the standard OTEL_* variables tune the exporter"},
		{"tracing-endpoint", kindString, "", "URL of the OTLP/HTTP collector, e.g. http://otel-collector:4318 (/v1/traces is added when there is no path); empty uses OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318"},
		{"log-level", kindString, "info", "trace, debug, info, warn or error; trace adds the Kafka client's and the embedded broker's own debug lines"},
		{"log-format", kindString, "text", "text or json"},
	})
}

// days writes d in whole days: Go durations stop at hours.
func days(d time.Duration) string {
	return strconv.Itoa(int(d/(24*time.Hour))) + " days"
}

// position is the place of a key in keys(), for sorting.
func position(name string) int {
	return slices.IndexFunc(keys(), func(k key) bool { return k.name == name })
}

func lookup(name string) (key, bool) {
	for _, k := range keys() {
		if k.name == name {
			return k, true
		}
	}
	return key{}, false
}

func defaults() map[string]any {
	m := map[string]any{}
	for _, k := range keys() {
		m[k.name] = k.def
	}
	return m
}

// envName is the environment variable of a key: KDELAY_CHECK_INTERVAL.
func envName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// keyOfEnv is the key an environment variable sets, or "" for none.
func keyOfEnv(env string) string {
	name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, EnvPrefix), "_", "-"))
	if _, ok := lookup(name); !ok {
		return ""
	}
	return name
}

// AddFlags adds --config and a flag for every setting to fs. Values are
// checked by Load, not by the flag parser, so that a bad value reads the same
// whichever source it came from.
func AddFlags(fs *pflag.FlagSet) {
	addFlags(fs, keys())
}

// AddClientFlags adds --config and the flags that locate kdelay's topics
// (brokers, listen, topic-prefix) and secure the connection (tls-*, sasl-*):
// what a command that only produces or consumes needs. also names more of
// serve's keys to add as flags, for a command that must read kdelay's state
// as serve sees it: "group" and "levels" name its consumer groups and level
// topics, "max-delay" is a rule a record is checked against. It panics on a
// name that is no key: that is a bug in the caller, not a user's mistake.
func AddClientFlags(fs *pflag.FlagSet, also ...string) {
	for _, name := range also {
		if _, ok := lookup(name); !ok {
			panic("config.AddClientFlags: no key " + name)
		}
	}
	ks := slices.DeleteFunc(keys(), func(k key) bool {
		return k.name != "brokers" && k.name != "listen" && k.name != "topic-prefix" && !isSecurity(k.name) && !slices.Contains(also, k.name)
	})
	for i, k := range ks {
		switch k.name {
		case "brokers":
			ks[i].usage = "Kafka seed brokers, host:port, comma-separated; empty connects to the embedded broker at --listen"
		case "listen":
			ks[i].usage = "host:port of kdelay serve's embedded broker, used when --brokers is empty"
		}
	}
	addFlags(fs, ks)
}

func addFlags(fs *pflag.FlagSet, ks []key) {
	fs.String(FlagConfig, "", "YAML file of settings (env "+EnvConfig+"); flags override the environment, which overrides the file")
	for _, k := range ks {
		if isSecret(k.name) {
			continue // the environment and the file only: see isSecret
		}
		fs.Var(&flagValue{kind: k.kind, s: k.def}, k.name, k.usage)
		if k.kind == kindBool {
			fs.Lookup(k.name).NoOptDefVal = "true" // --tls alone means --tls=true
		}
	}
}

// AddSecurityFlags adds --config and the tls-* and sasl-* flags, for a
// command with flags of its own for the rest, such as bench.
func AddSecurityFlags(fs *pflag.FlagSet) {
	addFlags(fs, slices.DeleteFunc(keys(), func(k key) bool { return !isSecurity(k.name) }))
}

// flagValue keeps a flag's text for decode. A list flag given twice appends,
// as pflag's own list flags do: --brokers a:9092 --brokers b:9092.
type flagValue struct {
	kind kind
	s    string
	set  bool
}

func (v *flagValue) String() string { return v.s }
func (v *flagValue) Type() string   { return string(v.kind) }

func (v *flagValue) Set(s string) error {
	if v.kind == kindList && v.set {
		s = v.s + "," + s
	}
	v.s, v.set = s, true
	return nil
}
