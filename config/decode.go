package config

import (
	units "github.com/docker/go-units"

	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// decode turns the merged values into a Config and checks it, collecting
// every problem rather than stopping at the first.
func (l *loader) decode() (Config, error) {
	d := &decoder{loader: l}
	c := Config{
		Brokers:           d.brokers(),
		Listen:            d.listen(),
		DataDir:           d.text("data-dir"),
		TopicPrefix:       d.topicPrefix(),
		Levels:            d.levels(),
		Partitions:        int32(d.integer("partitions", 1, math.MaxInt32, "use at least 1")),
		ReplicationFactor: int16(d.replicationFactor()),
		Retention:         d.retention(),
		RetentionHeadroom: d.duration("retention-headroom"),
		Group:             d.nonEmpty("group"),
		Mode:              d.oneOf("mode", "exact", "poll"),
		CheckInterval:     d.duration("check-interval"),
		FetchMaxWait:      d.duration("fetch-max-wait"),
		IdleFetchMaxWait:  d.duration("idle-fetch-max-wait"),
		MaxBufferedBytes:  d.size("max-buffered-bytes"),
		MaxDelay:          d.duration("max-delay"),
		DeliveryTimeout:   d.duration("delivery-timeout"),
		Delivery:          d.oneOf("delivery", string(forwarder.AtLeastOnce), string(forwarder.ExactlyOnce)),
		CommitInterval:    d.duration("commit-interval"),
		CommitLinger:      d.duration("commit-linger"),
		ScheduleLookahead: d.duration("schedule-lookahead"),
		StuckAfter:        d.duration("stuck-after"),
		SessionTimeout:    d.duration("session-timeout"),
		InstanceID:        d.text("instance-id"),
		ShutdownTimeout:   d.duration("shutdown-timeout"),
		Admin:             d.admin(),
		ConsoleActions:    d.boolean("console-actions"),
		ConsoleAuthFile:   d.text("console-auth-file"),
		Tracing:           d.boolean("tracing"),
		TracingEndpoint:   d.tracingEndpoint(),
		LogLevel:          d.logLevel(),
		LogFormat:         d.oneOf("log-format", "text", "json"),
		TLS:               d.tls(),
		SASL:              d.sasl(),
	}
	if c.Embedded() && (c.TLS != nil || c.SASL != nil) {
		name := cmp.Or(d.firstSet(isSecurity), "tls")
		d.fail(name, "is set, but with no brokers kdelay uses the embedded broker, which is plaintext on loopback; set brokers to your secured cluster, or remove the tls and sasl settings")
	}
	if c.TracingEndpoint != "" && !c.Tracing {
		d.fail("tracing-endpoint", "is set, but tracing is false, so no span is sent; set tracing to true, or remove tracing-endpoint")
	}
	// The default is lowered to a max-delay below it (serve_schedule.go);
	// a value set is refused.
	if c.ScheduleLookahead > c.MaxDelay && c.MaxDelay > 0 && d.firstSet(func(n string) bool { return n == "schedule-lookahead" }) != "" {
		d.fail("schedule-lookahead", "%s is above max-delay (%s): an occurrence is written into the ingress that long before its time, as a delay no longer than max-delay; lower it", kdelay.DurationText(c.ScheduleLookahead), kdelay.DurationText(c.MaxDelay))
	}
	d.console(c)
	if c.Embedded() && c.DataDir == "" {
		d.fail("data-dir", "is empty; name a directory for the embedded broker's data, such as ./kdelay-data")
	}
	c.Retention = cmp.Or(c.Retention, defaultRetention(c.Embedded()))
	c.security = d.securityEnviron()
	d.crossCheck(c)
	return c, d.err()
}

// decoder reads typed values, recording each problem with its key and the
// source of the value.
type decoder struct {
	*loader
	problems []problem
}

// problem is one bad value.
type problem struct {
	key string
	err error
}

func (d *decoder) fail(name, format string, args ...any) {
	msg := name + ": " + fmt.Sprintf(format, args...)
	if src := d.from[name]; src != "" {
		msg += " (from " + src + ")"
	}
	d.problems = append(d.problems, problem{name, errors.New(msg)})
}

// err joins the file's unknown keys, then the bad values in the order of the
// keys (that of --help), so that the same mistakes always read the same.
func (d *decoder) err() error {
	slices.SortStableFunc(d.problems, func(a, b problem) int { return cmp.Compare(position(a.key), position(b.key)) })
	errs := slices.Clone(d.unknown)
	for _, p := range d.problems {
		errs = append(errs, p.err)
	}
	return errors.Join(errs...)
}

// text is a single value as text: YAML numbers and booleans are accepted
// and read as written.
func (d *decoder) text(name string) string {
	switch v := d.k.Get(name).(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(v)
	case []any, map[string]any:
		d.fail(name, "is a list or a map; write a single value")
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (d *decoder) nonEmpty(name string) string {
	s := d.text(name)
	if s == "" {
		d.fail(name, "is empty; set it or leave it out for the default %s", def(name))
	}
	return s
}

// list is a YAML list, or comma-separated text; empty items are dropped.
func (d *decoder) list(name string) []string {
	var items []string
	switch v := d.k.Get(name).(type) {
	case nil:
	case []any:
		for _, item := range v {
			items = append(items, strings.TrimSpace(fmt.Sprint(item)))
		}
	default:
		items = strings.Split(d.text(name), ",")
	}
	var out []string
	for _, item := range items {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func (d *decoder) duration(name string) time.Duration { return d.durationLike(name, def(name)) }

// durationLike reads a Go duration; example is one for messages.
func (d *decoder) durationLike(name, example string) time.Duration {
	s := d.text(name)
	v, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.fail(name, "%q is not a Go duration such as %s", s, example)
	case v <= 0:
		d.fail(name, "%s is not positive; use a duration such as %s", s, example)
	}
	return v
}

// retention is 0 when empty, for its default: that depends on the broker
// (see defaultRetention).
func (d *decoder) retention() time.Duration {
	if d.text("retention") == "" {
		return 0
	}
	return d.durationLike("retention", kdelay.DurationText(forwarder.DefaultRetention))
}

// size reads a number of bytes: 67108864, 64MiB, 64m or 64MB (all the same;
// k, m and g count in 1024s, as memory limits do).
func (d *decoder) size(name string) int64 {
	s := d.text(name)
	v, err := units.RAMInBytes(s)
	switch {
	case err != nil:
		d.fail(name, "%q is not a size such as %s, 256MiB or 1GiB", s, def(name))
	case v <= 0:
		d.fail(name, "%s is not positive; use a size such as %s", s, def(name))
	}
	return v
}

func (d *decoder) integer(name string, lo, hi int64, fix string) int64 {
	s := d.text(name)
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		d.fail(name, "%q is not a whole number; %s", s, fix)
	case v < lo || v > hi:
		d.fail(name, "%d is out of range; %s", v, fix)
	}
	return v
}

func (d *decoder) replicationFactor() int64 {
	const fix = "use -1 for the broker's default, or 1 or more"
	v := d.integer("replication-factor", -1, math.MaxInt16, fix)
	if v == 0 {
		d.fail("replication-factor", "0 is not a replication factor; %s", fix)
	}
	return v
}

func (d *decoder) oneOf(name string, allowed ...string) string {
	s := strings.ToLower(d.text(name))
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	d.fail(name, "%q is not one of %s; use one of them", s, strings.Join(allowed, ", "))
	return s
}

func (d *decoder) logLevel() slog.Level {
	s := d.oneOf("log-level", "trace", "debug", "info", "warn", "error")
	if s == "trace" {
		return LevelTrace
	}
	var l slog.Level
	_ = l.UnmarshalText([]byte(s)) // an unknown level was reported by oneOf
	return l
}

func (d *decoder) levels() levels.Set {
	s, err := levels.Parse(d.list("levels"))
	if err != nil {
		d.fail("levels", "%v", err)
	}
	return s
}

func (d *decoder) brokers() []string {
	brokers := d.list("brokers")
	for _, b := range brokers {
		if _, _, err := hostPort(b); err != nil {
			d.fail("brokers", "%q %v; write each broker as host:port, e.g. kafka1:9092", b, err)
		}
	}
	return brokers
}

// listen is where the embedded broker listens. The broker advertises this
// address to clients, so it must be one they can connect to: a wildcard such
// as 0.0.0.0 would be advertised as is.
func (d *decoder) listen() string {
	s := d.text("listen")
	host, _, err := hostPort(s)
	switch {
	case err != nil:
		d.fail("listen", "%q %v; write host:port, e.g. 127.0.0.1:9092", s, err)
	case net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified():
		d.fail("listen", "%q is a wildcard address, which the broker would advertise to clients as is; listen on an address they can reach, e.g. 127.0.0.1:9092 or this host's IP", s)
	}
	return s
}

// admin is where the admin listener listens, "" for nowhere. Unlike
// listen, a wildcard or an empty host is fine: nothing advertises it.
func (d *decoder) admin() string {
	s := d.text("admin")
	if s == "" {
		return ""
	}
	_, p, err := net.SplitHostPort(s)
	if port, perr := strconv.Atoi(p); err != nil || perr != nil || port < 0 || port > math.MaxUint16 {
		d.fail("admin", "%q is not host:port; write e.g. %s, :9464 for every interface, or empty to turn the listener off", s, def("admin"))
	}
	return s
}

// tracingEndpoint is the collector's URL, "" for the exporter's own
// settings. The message does not repeat the value: a URL refused for its
// user or query may hold a secret.
func (d *decoder) tracingEndpoint() string {
	s := d.text("tracing-endpoint")
	if s == "" {
		return ""
	}
	if _, err := admin.TracesURL(s); err != nil {
		d.fail("tracing-endpoint", "%v", err)
	}
	return s
}

// console checks the web console's settings against the admin listener
// that serves it. Its actions, without credentials, are open to whoever
// reaches the listener: that is allowed on loopback alone, which only
// those on the machine reach.
func (d *decoder) console(c Config) {
	switch {
	case c.Admin == "" && c.ConsoleActions:
		d.fail("console-actions", "is true, but admin is empty, so no console is served; set admin, or remove console-actions")
	case c.ConsoleActions && c.ConsoleAuthFile == "" && !loopback(c.Admin):
		d.fail("console-actions", "is true and admin %s is not on loopback, so whoever reaches it could replay dead letters and cancel messages; "+
			"set console-auth-file to a file of credentials (docs/CONSOLE.md, Safety), or set admin to a loopback address such as %s", c.Admin, def("admin"))
	}
}

// loopback reports whether addr's host is a loopback address or localhost;
// an empty host (":9464") listens on every interface, so it is not.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func hostPort(s string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, errors.New("is not host:port")
	}
	if host == "" {
		return "", 0, errors.New("has no host")
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > math.MaxUint16 {
		return "", 0, errors.New("has no valid port")
	}
	return host, port, nil
}

// maxPrefixLen leaves room after the prefix for the longest topic name
// kdelay makes of it.
const maxPrefixLen = 200

func (d *decoder) topicPrefix() string {
	s := d.text("topic-prefix")
	switch {
	case s == "" || !kdelay.TopicChars(s):
		d.fail("topic-prefix", "%q cannot start a Kafka topic name; use letters, digits, '.', '_' and '-'", s)
	case len(s) > maxPrefixLen:
		// The longest level name still has to fit after the prefix.
		d.fail("topic-prefix", "is %d characters long; use at most %d so that topic names stay under Kafka's %d", len(s), maxPrefixLen, kdelay.MaxTopicLen)
	}
	return s
}

// crossCheck checks settings against each other, once each is valid alone:
// the forwarder repeats these checks, but a mistake is better reported
// before an embedded broker starts.
func (d *decoder) crossCheck(c Config) {
	if len(d.problems) > 0 {
		return
	}
	if need := c.Levels.Largest().Delay + c.RetentionHeadroom; c.Retention < need {
		d.fail("retention", "%s is shorter than the largest level %s plus retention-headroom %s; use at least %s",
			c.Retention, c.Levels.Largest().Name, c.RetentionHeadroom, need)
	}
	if c.MaxDelay < c.Levels.Smallest().Delay {
		d.fail("max-delay", "%s is below the smallest level %s; raise it", c.MaxDelay, c.Levels.Smallest().Name)
	}
}

// def is a key's default, for messages.
func def(name string) string {
	k, _ := lookup(name)
	return k.def
}
