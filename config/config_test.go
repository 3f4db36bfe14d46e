package config

import (
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kdelay/kdelay/levels"
)

// sources are the inputs of one Load: a YAML file (none when empty), the
// environment and the command line.
type sources struct {
	yaml string
	env  []string
	args []string
}

// load runs Load on src. A YAML file is passed with --config unless the
// arguments or the environment name one already.
func load(t *testing.T, src sources) (Config, error) {
	t.Helper()
	args := src.args
	if src.yaml != "" {
		path := filepath.Join(t.TempDir(), "kdelay.yaml")
		if err := os.WriteFile(path, []byte(src.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", path}, args...)
	}
	fs := pflag.NewFlagSet("kdelay", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return Load(fs, src.env)
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	got, err := load(t, sources{})
	if err != nil {
		t.Fatalf("Load with nothing set: %v", err)
	}
	want := Config{
		Listen:            "127.0.0.1:9092",
		DataDir:           "./kdelay-data",
		TopicPrefix:       "kdelay",
		Levels:            levels.Default(),
		Partitions:        6,
		ReplicationFactor: -1,
		Retention:         24 * time.Hour, // on the embedded broker
		RetentionHeadroom: time.Hour,
		Group:             "kdelay",
		Mode:              "exact",
		CheckInterval:     100 * time.Millisecond,
		FetchMaxWait:      100 * time.Millisecond,
		IdleFetchMaxWait:  5 * time.Second,
		MaxBufferedBytes:  64 << 20,
		MaxDelay:          400 * 24 * time.Hour,
		DeliveryTimeout:   5 * time.Minute,
		Delivery:          "at-least-once",
		CommitInterval:    time.Second,
		CommitLinger:      10 * time.Millisecond,
		ScheduleLookahead: time.Minute,
		StuckAfter:        time.Minute,
		SessionTimeout:    10 * time.Second,
		ShutdownTimeout:   10 * time.Second,
		Admin:             "127.0.0.1:9464",
		LogLevel:          slog.LevelInfo,
		LogFormat:         "text",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, want)
	}
	if !got.Embedded() || !reflect.DeepEqual(got.Seeds(), []string{"127.0.0.1:9092"}) {
		t.Errorf("with no brokers: Embedded() = %v, Seeds() = %v; want true, the listen address", got.Embedded(), got.Seeds())
	}
	cluster, err := load(t, sources{env: []string{"KDELAY_BROKERS=kafka1:9092"}})
	if err != nil {
		t.Fatalf("Load with brokers: %v", err)
	}
	if cluster.Retention != 168*time.Hour {
		t.Errorf("retention with brokers = %s, want 168h", cluster.Retention)
	}
}

func TestExampleFile(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("kdelay", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse([]string{"--config", "testdata/kdelay.yaml"}); err != nil {
		t.Fatal(err)
	}
	got, err := Load(fs, nil)
	if err != nil {
		t.Fatalf("Load testdata/kdelay.yaml: %v", err)
	}
	want, err := load(t, sources{})
	if err != nil {
		t.Fatal(err)
	}
	want.File = "testdata/kdelay.yaml"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("testdata/kdelay.yaml does not list the defaults:\n got %+v\nwant %+v", got, want)
	}
	text, err := os.ReadFile("testdata/kdelay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys() {
		if !strings.Contains(string(text), "\n"+k.name+":") {
			t.Errorf("testdata/kdelay.yaml does not list %s", k.name)
		}
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		src   sources
		check func(Config) (got, want any)
	}{
		{"file over default",
			sources{yaml: "check-interval: 200ms\n"},
			func(c Config) (any, any) { return c.CheckInterval, 200 * time.Millisecond }},
		{"environment over file",
			sources{yaml: "check-interval: 200ms\n", env: []string{"KDELAY_CHECK_INTERVAL=300ms"}},
			func(c Config) (any, any) { return c.CheckInterval, 300 * time.Millisecond }},
		{"flag over environment",
			sources{yaml: "check-interval: 200ms\n", env: []string{"KDELAY_CHECK_INTERVAL=300ms"}, args: []string{"--check-interval=400ms"}},
			func(c Config) (any, any) { return c.CheckInterval, 400 * time.Millisecond }},
		{"unset flag keeps the environment",
			sources{env: []string{"KDELAY_GROUP=orders"}, args: []string{"--mode=poll"}},
			func(c Config) (any, any) { return []string{c.Group, c.Mode}, []string{"orders", "poll"} }},
		{"exactly-once delivery with its instance id",
			sources{env: []string{"KDELAY_INSTANCE_ID=node-1"}, args: []string{"--delivery", "exactly-once"}},
			func(c Config) (any, any) {
				return []string{c.Delivery, c.InstanceID}, []string{"exactly-once", "node-1"}
			}},
		{"YAML list",
			sources{yaml: "levels: [1s, 5s, 1m]\n"},
			func(c Config) (any, any) { return c.Levels.Names(), []string{"1s", "5s", "1m"} }},
		{"comma-separated list in the environment replaces the file's",
			sources{yaml: "levels: [1s, 5s]\n", env: []string{"KDELAY_LEVELS=2s, 3s"}},
			func(c Config) (any, any) { return c.Levels.Names(), []string{"2s", "3s"} }},
		{"list flag given twice appends",
			sources{args: []string{"--brokers", "a:9092", "--brokers", "b:9092,c:9092"}},
			func(c Config) (any, any) { return c.Brokers, []string{"a:9092", "b:9092", "c:9092"} }},
		{"empty environment variable clears the file's brokers",
			sources{yaml: "brokers: [kafka:9092]\n", env: []string{"KDELAY_BROKERS="}},
			func(c Config) (any, any) { return c.Embedded(), true }},
		{"brokers are the seeds",
			sources{yaml: "brokers: kafka1:9092,kafka2:9092\n"},
			func(c Config) (any, any) { return c.Seeds(), []string{"kafka1:9092", "kafka2:9092"} }},
		{"YAML numbers",
			sources{yaml: "partitions: 12\nreplication-factor: 3\n"},
			func(c Config) (any, any) { return []any{c.Partitions, c.ReplicationFactor}, []any{int32(12), int16(3)} }},
		{"size with a unit",
			sources{args: []string{"--max-buffered-bytes=256MiB"}},
			func(c Config) (any, any) { return c.MaxBufferedBytes, int64(256 << 20) }},
		{"size in bytes",
			sources{yaml: "max-buffered-bytes: 1048576\n"},
			func(c Config) (any, any) { return c.MaxBufferedBytes, int64(1 << 20) }},
		{"log level and format",
			sources{env: []string{"KDELAY_LOG_LEVEL=DEBUG", "KDELAY_LOG_FORMAT=json"}},
			func(c Config) (any, any) { return []any{c.LogLevel, c.LogFormat}, []any{slog.LevelDebug, "json"} }},
		{"log level trace",
			sources{args: []string{"--log-level=trace"}},
			func(c Config) (any, any) { return c.LogLevel, LevelTrace }},
		{"tracing on, with a collector",
			sources{yaml: "tracing: true\n", env: []string{"KDELAY_TRACING_ENDPOINT=http://otel-collector:4318"}},
			func(c Config) (any, any) {
				return []any{c.Tracing, c.TracingEndpoint}, []any{true, "http://otel-collector:4318"}
			}},
		{"tracing off by default",
			sources{},
			func(c Config) (any, any) { return []any{c.Tracing, c.TracingEndpoint}, []any{false, ""} }},
		{"unknown KDELAY_ variables are ignored",
			sources{env: []string{"KDELAY_TEST_BROKERS=kafka:9092", "KDELAY_GROUP=g"}},
			func(c Config) (any, any) { return []any{c.Embedded(), c.Group}, []any{true, "g"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.src)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got, want := tt.check(c); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestConfigFileFromEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	fromEnv := write("env.yaml", "group: from-env-file\n")
	fromFlag := write("flag.yaml", "group: from-flag-file\n")

	t.Run("KDELAY_CONFIG names the file", func(t *testing.T) {
		t.Parallel()
		c, err := load(t, sources{env: []string{"KDELAY_CONFIG=" + fromEnv}})
		if err != nil || c.Group != "from-env-file" || c.File != fromEnv {
			t.Errorf("got group %q from %q (err %v), want %q from %s", c.Group, c.File, err, "from-env-file", fromEnv)
		}
	})
	t.Run("--config wins over KDELAY_CONFIG", func(t *testing.T) {
		t.Parallel()
		c, err := load(t, sources{env: []string{"KDELAY_CONFIG=" + fromEnv}, args: []string{"--config", fromFlag}})
		if err != nil || c.Group != "from-flag-file" {
			t.Errorf("got group %q (err %v), want %q", c.Group, err, "from-flag-file")
		}
	})
}

func TestValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  sources
		want string // the error, or a part of it
	}{
		{"duration", sources{env: []string{"KDELAY_CHECK_INTERVAL=10x"}},
			`check-interval: "10x" is not a Go duration such as 100ms (from KDELAY_CHECK_INTERVAL)`},
		{"size", sources{env: []string{"KDELAY_MAX_BUFFERED_BYTES=lots"}},
			`max-buffered-bytes: "lots" is not a size such as 64MiB, 256MiB or 1GiB (from KDELAY_MAX_BUFFERED_BYTES)`},
		{"zero size", sources{args: []string{"--max-buffered-bytes=0"}},
			"max-buffered-bytes: 0 is not positive; use a size such as 64MiB (from --max-buffered-bytes)"},
		{"duration without unit", sources{yaml: "fetch-max-wait: 500\n"},
			`fetch-max-wait: "500" is not a Go duration such as 100ms (from `},
		{"zero duration", sources{args: []string{"--commit-interval=0"}},
			"commit-interval: 0 is not positive; use a duration such as 1s (from --commit-interval)"},
		{"negative duration", sources{args: []string{"--shutdown-timeout=-1s"}},
			"shutdown-timeout: -1s is not positive; use a duration such as 10s"},
		{"max-delay", sources{args: []string{"--max-delay=forever"}},
			`max-delay: "forever" is not a Go duration such as 9600h`},
		{"schedule-lookahead above max-delay", sources{args: []string{"--max-delay=1h", "--schedule-lookahead=2h"}},
			"schedule-lookahead: 2h is above max-delay (1h): an occurrence is written into the ingress that long before its time, as a delay no longer than max-delay; lower it"},
		{"retention", sources{args: []string{"--retention=7d"}},
			`retention: "7d" is not a Go duration such as 168h`},
		{"retention-headroom", sources{args: []string{"--retention-headroom="}},
			`retention-headroom: "" is not a Go duration such as 1h`},
		{"partitions not a number", sources{args: []string{"--partitions=six"}},
			`partitions: "six" is not a whole number; use at least 1`},
		{"partitions zero", sources{args: []string{"--partitions=0"}},
			"partitions: 0 is out of range; use at least 1"},
		{"replication factor zero", sources{args: []string{"--replication-factor=0"}},
			"replication-factor: 0 is not a replication factor; use -1 for the broker's default, or 1 or more"},
		{"replication factor below -1", sources{args: []string{"--replication-factor=-2"}},
			"replication-factor: -2 is out of range; use -1 for the broker's default, or 1 or more"},
		{"mode", sources{args: []string{"--mode=fast"}},
			`mode: "fast" is not one of exact, poll; use one of them`},
		{"delivery", sources{args: []string{"--delivery=once"}},
			`delivery: "once" is not one of at-least-once, exactly-once; use one of them`},
		{"log level", sources{env: []string{"KDELAY_LOG_LEVEL=verbose"}},
			`log-level: "verbose" is not one of trace, debug, info, warn, error`},
		{"log format", sources{yaml: "log-format: xml\n"},
			`log-format: "xml" is not one of text, json`},
		{"level not a duration", sources{args: []string{"--levels=1s,1x"}},
			`levels: level "1x" is not a Go duration such as 1s, 90s or 2h (from --levels)`},
		{"levels repeat a delay", sources{args: []string{"--levels=1s,1000ms"}},
			`levels: levels "1s" and "1000ms" are the same delay`},
		{"no levels", sources{env: []string{"KDELAY_LEVELS="}},
			"levels: no levels: list at least one delay"},
		{"broker without port", sources{args: []string{"--brokers=kafka1"}},
			`brokers: "kafka1" is not host:port; write each broker as host:port, e.g. kafka1:9092`},
		{"listen without port", sources{args: []string{"--listen=localhost"}},
			`listen: "localhost" is not host:port; write host:port, e.g. 127.0.0.1:9092`},
		{"listen without host", sources{args: []string{"--listen=:9092"}},
			`listen: ":9092" has no host`},
		{"listen on a wildcard", sources{args: []string{"--listen=0.0.0.0:9092"}},
			`listen: "0.0.0.0:9092" is a wildcard address`},
		{"admin without port", sources{args: []string{"--admin=localhost"}},
			`admin: "localhost" is not host:port; write e.g. 127.0.0.1:9464, :9464 for every interface, or empty to turn the listener off (from --admin)`},
		{"admin port not a number", sources{env: []string{"KDELAY_ADMIN=127.0.0.1:metrics"}},
			`admin: "127.0.0.1:metrics" is not host:port; write e.g. 127.0.0.1:9464`},
		{"admin port out of range", sources{yaml: "admin: :70000\n"},
			`admin: ":70000" is not host:port`},
		{"tracing endpoint not a URL", sources{args: []string{"--tracing", "--tracing-endpoint=otel-collector:4318"}},
			"tracing-endpoint: is not an http or https URL with a host; write it as http://otel-collector:4318 (from --tracing-endpoint)"},
		{"tracing endpoint with a password", sources{env: []string{"KDELAY_TRACING=true", "KDELAY_TRACING_ENDPOINT=https://alice:s3cret@traces.example.com"}},
			"tracing-endpoint: has a user, a password, a query or a fragment, which the OTLP exporter does not send; write scheme://host:port/path only, and put credentials in OTEL_EXPORTER_OTLP_HEADERS"},
		{"tracing endpoint without tracing", sources{yaml: "tracing-endpoint: http://otel-collector:4318\n"},
			"tracing-endpoint: is set, but tracing is false, so no span is sent; set tracing to true, or remove tracing-endpoint"},
		{"console actions off loopback without credentials", sources{args: []string{"--console-actions", "--admin=:9464"}},
			"console-actions: is true and admin :9464 is not on loopback, so whoever reaches it could replay dead letters and cancel messages; " +
				"set console-auth-file to a file of credentials (docs/CONSOLE.md, Safety), or set admin to a loopback address such as 127.0.0.1:9464 (from --console-actions)"},
		{"console actions without an admin listener", sources{env: []string{"KDELAY_CONSOLE_ACTIONS=true", "KDELAY_ADMIN="}},
			"console-actions: is true, but admin is empty, so no console is served; set admin, or remove console-actions (from KDELAY_CONSOLE_ACTIONS)"},
		{"tracing not a boolean", sources{env: []string{"KDELAY_TRACING=on"}},
			`tracing: "on" is neither true nor false; write true or false (from KDELAY_TRACING)`},
		{"topic prefix", sources{args: []string{"--topic-prefix=my delays"}},
			`topic-prefix: "my delays" cannot start a Kafka topic name; use letters, digits, '.', '_' and '-'`},
		{"empty group", sources{env: []string{"KDELAY_GROUP="}},
			"group: is empty; set it or leave it out for the default kdelay (from KDELAY_GROUP)"},
		{"embedded broker without data dir", sources{args: []string{"--data-dir="}},
			"data-dir: is empty; name a directory for the embedded broker's data"},
		{"retention shorter than the largest level", sources{args: []string{"--retention=2h"}},
			"retention: 2h0m0s is shorter than the largest level 2h plus retention-headroom 1h0m0s; use at least 3h0m0s (from --retention)"},
		{"max delay below the smallest level", sources{args: []string{"--max-delay=500ms"}},
			"max-delay: 500ms is below the smallest level 1s; raise it"},
		{"list for a single value", sources{yaml: "group: [a, b]\n"},
			"group: is a list or a map; write a single value"},
		{"misspelt key in the file", sources{yaml: "chek-interval: 100ms\n"},
			`unknown key "chek-interval"; did you mean "check-interval"?`},
		{"unknown key in the file", sources{yaml: "kafka:\n  brokers: [a:9092]\n"},
			`unknown key "kafka"; remove it; kdelay serve --help lists the keys`},
		{"YAML syntax", sources{yaml: "levels: [1s\n"},
			"fix the file or the path given to --config or KDELAY_CONFIG"},
		{"missing file", sources{args: []string{"--config=/nonexistent/kdelay.yaml"}},
			"config file /nonexistent/kdelay.yaml: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.src)
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q repeats a secret of the value", err)
			}
		})
	}
}

// TestConsoleActions checks where the web console may act: off by default,
// on loopback when asked, and elsewhere only with credentials.
func TestConsoleActions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		actions bool
	}{
		{"read-only by default", nil, false},
		{"on loopback when asked", []string{"--console-actions"}, true},
		{"on localhost when asked", []string{"--console-actions", "--admin=localhost:9464"}, true},
		{"off loopback with credentials", []string{"--console-actions", "--admin=:9464", "--console-auth-file=/etc/kdelay/console"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, sources{args: tt.args})
			if err != nil || c.ConsoleActions != tt.actions {
				t.Errorf("Load(%q): console-actions %v, %v; want %v and no error", tt.args, c.ConsoleActions, err, tt.actions)
			}
		})
	}
}

func TestEveryProblemReported(t *testing.T) {
	t.Parallel()
	_, err := load(t, sources{args: []string{"--mode=fast", "--partitions=0", "--check-interval=soon"}})
	if err == nil {
		t.Fatal("Load succeeded with three bad values")
	}
	for _, key := range []string{"mode:", "partitions:", "check-interval:"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not report %s", err, key)
		}
	}
}

func TestClientFlags(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("send", pflag.ContinueOnError)
	AddClientFlags(fs)
	for _, name := range []string{"config", "brokers", "listen", "topic-prefix"} {
		if fs.Lookup(name) == nil {
			t.Errorf("AddClientFlags did not add --%s", name)
		}
	}
	if fs.Lookup("check-interval") != nil {
		t.Error("AddClientFlags added --check-interval, a setting of serve only")
	}
	if err := fs.Parse([]string{"--topic-prefix=orders"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(fs, []string{"KDELAY_LISTEN=127.0.0.1:9999"})
	if err != nil {
		t.Fatal(err)
	}
	if c.TopicPrefix != "orders" || c.Seeds()[0] != "127.0.0.1:9999" {
		t.Errorf("got prefix %q seeds %v, want orders and the listen address from the environment", c.TopicPrefix, c.Seeds())
	}
}

// TestClientFlagsAlso checks that a command reading kdelay's state, such
// as status, gets the serve keys it names as flags, and only those.
func TestClientFlagsAlso(t *testing.T) {
	t.Parallel()
	fs := pflag.NewFlagSet("status", pflag.ContinueOnError)
	AddClientFlags(fs, "group", "levels")
	if fs.Lookup("check-interval") != nil || fs.Lookup("max-delay") != nil {
		t.Error("AddClientFlags added a key it was not asked for")
	}
	if err := fs.Parse([]string{"--group=g", "--levels=1s,1h", "--brokers=b:9092"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Group != "g" || len(c.Levels) != 2 || c.Levels[1].Name != "1h" || c.Seeds()[0] != "b:9092" {
		t.Errorf("got group %q levels %v seeds %v, want g, [1s 1h] and b:9092", c.Group, c.Levels, c.Seeds())
	}
}

// TestConfigProblemOrder checks that Load reports problems in the order of the
// keys in --help, whichever source set them and whatever check found them,
// the same on every run.
func TestConfigProblemOrder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kdelay.yaml")
	if err := os.WriteFile(path, []byte("shutdown-timeout: 0s\nlevels: [1x]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := sources{
		env:  []string{"KDELAY_MODE=fast", "KDELAY_CONFIG=" + path},
		args: []string{"--partitions=0", "--brokers=kafka1", "--log-format=xml", "--check-interval=soon"},
	}
	want := []string{"brokers", "levels", "partitions", "mode", "check-interval", "shutdown-timeout", "log-format"}
	_, first := load(t, src)
	if first == nil {
		t.Fatal("Load succeeded with seven bad values")
	}
	var got []string
	for line := range strings.Lines(first.Error()) {
		key, _, _ := strings.Cut(line, ":")
		got = append(got, key)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load reported the keys in this order:\n%v\nwant:\n%v\nerror:\n%v", got, want, first)
	}
	for range 10 {
		if _, err := load(t, src); err == nil || err.Error() != first.Error() {
			t.Fatalf("Load reported the same problems differently:\n%v\nthen:\n%v", first, err)
		}
	}

	t.Run("a check of the embedded broker is in key order too", func(t *testing.T) {
		t.Parallel()
		_, err := load(t, sources{args: []string{"--data-dir=", "--mode=fast"}})
		if err == nil || !strings.HasPrefix(err.Error(), "data-dir: ") || !strings.Contains(err.Error(), "\nmode: ") {
			t.Errorf("error:\n%v\nwant data-dir's problem, then mode's", err)
		}
	})
}

// TestConfigFileProblemsTogether checks that a file with unknown keys and bad
// values gets one error listing all of them, each with its key, the file and
// the fix: unknown keys first, since a misspelt key is why its setting kept
// its default, then the values in key order.
func TestConfigFileProblemsTogether(t *testing.T) {
	t.Parallel()
	yaml := "chek-interval: 100ms\npartitions: 0\nkafka:\n  brokers: [a:9092]\nmode: fast\n"
	path := filepath.Join(t.TempDir(), "kdelay.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("kdelay", pflag.ContinueOnError)
	AddFlags(fs)
	if err := fs.Parse([]string{"--config", path, "--fetch-max-wait=1"}); err != nil {
		t.Fatal(err)
	}
	_, err := Load(fs, nil)
	if err == nil {
		t.Fatal("Load succeeded with two unknown keys and three bad values")
	}
	want := []string{
		`config file ` + path + `: unknown key "chek-interval"; did you mean "check-interval"?`,
		`config file ` + path + `: unknown key "kafka"; remove it; kdelay serve --help lists the keys`,
		`partitions: 0 is out of range; use at least 1 (from ` + path + `)`,
		`mode: "fast" is not one of exact, poll; use one of them (from ` + path + `)`,
		`fetch-max-wait: "1" is not a Go duration such as 100ms (from --fetch-max-wait)`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("error:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}
