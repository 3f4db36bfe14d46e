package main

// Tests on a secured real broker (KDELAY_TEST_SECURE, from
// `KAFKA_SECURITY=sasl_ssl scripts/local-kafka start`): kdelay run as a user
// would, with the KDELAY_* settings the script writes for them.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/kafkatest"
)

// secured is a test's view of the secured broker: its settings, its admin
// client, and topics and a group of the test's own that kdelay's ACLs
// allow (they start with "kdelay" and "orders").
type secured struct {
	t      *testing.T
	bin    string
	broker *kafkatest.Secure
	admin  config.Config
	prefix string // of kdelay's topics and group
	target string
}

func setupSecured(t *testing.T) *secured {
	t.Helper()
	s := &secured{t: t, broker: kafkatest.NewSecure(t), bin: binary(t)}
	name := kafkatest.Name(t)
	s.prefix, s.target = "kdelay-"+name, "orders-"+name
	s.admin = s.config("admin")
	cl := s.client(s.admin)
	adm := kadm.NewClient(cl)
	ctx := t.Context()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, s.target); err != nil {
		t.Fatalf("create %s as admin: %v", s.target, err)
	}
	t.Cleanup(func() {
		// t.Context is done by now.
		cl := s.client(s.admin)
		adm := kadm.NewClient(cl)
		topics := []string{s.target, s.prefix + ".ingress", s.prefix + ".level.1s", s.prefix + ".level.2s", s.prefix + ".dlq"}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topics...)
	})
	return s
}

// config loads the settings a user would source from the file for user.
func (s *secured) config(user string) config.Config {
	s.t.Helper()
	c, err := config.Load(pflag.NewFlagSet("test", pflag.ContinueOnError), s.broker.Settings(user))
	if err != nil {
		s.t.Fatalf("settings of %s: %v", user, err)
	}
	return c
}

func (s *secured) client(c config.Config, opts ...kgo.Opt) *kgo.Client {
	s.t.Helper()
	cl, err := kgo.NewClient(slices.Concat([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, c.ClientOpts(), opts)...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(cl.Close)
	return cl
}

// command runs kdelay with the settings of user and extra variables, which
// override them.
func (s *secured) command(user string, extra []string, args ...string) *exec.Cmd {
	cmd := command(s.bin, s.t.TempDir(), args...)
	cmd.Env = append(append(cmd.Env, s.broker.Settings(user)...), extra...)
	return cmd
}

// collect reads topic from its start as admin.
func (s *secured) collect(topic string) *kafkatest.Collector {
	return kafkatest.Collect(s.t, s.admin.Brokers, topic, s.admin.ClientOpts()...)
}

// TestSecureDelivery runs kdelay serve, send and tail as the kdelay
// principal over each secured listener: records reach their target; one
// for a target kdelay may not write to is dead-lettered with the
// authorisation error, and the level keeps moving past it. No password
// shows in anything kdelay printed, even at log-level debug.
func TestSecureDelivery(t *testing.T) {
	t.Parallel()
	for _, user := range []struct{ name, settings string }{
		{"SASL_SSL SCRAM-SHA-512", "kdelay"},
		{"mTLS", "mtls"},
	} {
		t.Run(user.name, func(t *testing.T) {
			t.Parallel()
			s := setupSecured(t)
			target, dlq := s.collect(s.target), s.collect(kdelay.Topics{Prefix: s.prefix}.DLQ())
			serve := &process{
				cmd: s.command(user.settings, nil, "serve", "--topic-prefix", s.prefix, "--group", s.prefix,
					"--levels", "1s,2s", "--partitions", "1", "--log-level", "debug"),
				out: &output{ready: make(chan string, 1)}, exited: make(chan struct{}),
			}
			startProcess(t, serve)
			// The how-to follows the ready line.
			if !eventually(5*time.Second, func() bool { return strings.Contains(serve.out.String(), "need the same TLS and SASL settings") }) {
				t.Errorf("kdelay serve's how-to does not say that send and tail need its TLS and SASL settings:\n%s", serve.out)
			}

			send := func(target, value string) {
				t.Helper()
				code, out, _ := runWithin(t, 20*time.Second,
					s.command(user.settings, nil, "send", "--topic-prefix", s.prefix, "--target", target, "--delay", "1s", value))
				if code != 0 {
					t.Fatalf("kdelay send to %s: exit %d:\n%s", target, code, out)
				}
			}
			// Forbidden first: the good record, behind it on the same
			// level partition, arrives only if the level moves past it.
			send("forbidden", "refused")
			send(s.target, "delivered")

			got := target.Until(30*time.Second, all([]string{"delivered"}))
			if kafkatest.Values(got)["delivered"] != 1 {
				t.Errorf("target %s got %v, want the record once", s.target, kafkatest.Values(got))
			}
			dead := dlq.Until(30*time.Second, all([]string{"refused"}))
			if len(dead) != 1 {
				t.Fatalf("dead-letter topic got %d records, want the one for topic forbidden", len(dead))
			}
			if reason := headerOf(dead[0].Record, kdelay.HeaderError); !strings.Contains(reason, "not allowed to write") {
				t.Errorf("dead letter's %s = %q, want the authorisation failure", kdelay.HeaderError, reason)
			}

			// kdelay may read its own topics; targets only admin may read.
			dlqTopic := kdelay.Topics{Prefix: s.prefix}.DLQ()
			code, out, _ := runWithin(t, 5*time.Second, s.command(user.settings, nil, "tail", "--from-beginning", dlqTopic))
			if code != -1 || !strings.Contains(out, `value="refused"`) {
				t.Errorf("kdelay tail --from-beginning %s (stopped after 5s): exit %d:\n%s", dlqTopic, code, out)
			}
			code, out, _ = runWithin(t, 10*time.Second, s.command(user.settings, nil, "tail", s.target))
			if code != 1 || !strings.Contains(out, "READ on "+s.target) {
				t.Errorf("kdelay tail %s, a topic kdelay may not read: exit %d:\n%s\nwant exit 1 naming the ACL", s.target, code, out)
			}
			if code, took := serve.stop(t); code != 0 {
				t.Errorf("kdelay serve exited %d after %s:\n%s", code, took, serve.out)
			}
			for _, secret := range []string{s.broker.Password("kdelay"), s.broker.Password("admin")} {
				if strings.Contains(serve.out.String(), secret) || strings.Contains(out, secret) {
					t.Errorf("a password shows in kdelay's output")
				}
			}
		})
	}
}

// startProcess starts p and waits until it prints that it is ready.
func startProcess(t *testing.T, p *process) {
	t.Helper()
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", p.cmd.Args, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%v printed:\n%s", p.cmd.Args, p.out)
		}
	})
	select {
	case p.brokers = <-p.out.ready:
	case <-p.exited:
		t.Fatalf("%v exited before it was ready (%v):\n%s", p.cmd.Args, p.err, p.out)
	case <-time.After(30 * time.Second):
		t.Fatalf("%v not ready after 30s:\n%s", p.cmd.Args, p.out)
	}
}

// TestSecureRefusals checks that a connection the broker refuses fails
// within seconds, with exit status 1 and a message naming the setting to
// fix, and no secret in it.
func TestSecureRefusals(t *testing.T) {
	t.Parallel()
	s := setupSecured(t)
	dir := t.TempDir()
	wrongPassword := filepath.Join(dir, "wrong-password")
	if err := os.WriteFile(wrongPassword, []byte("not-the-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rogueCA, _ := kafkatest.SelfSigned(t, dir, "rogue-ca")
	rogueCert, rogueKey := kafkatest.SelfSigned(t, dir, "kdelay")
	tests := []struct {
		name     string
		settings string
		extra    []string
		args     []string
		want     string
	}{
		{"wrong password", "kdelay", []string{"KDELAY_SASL_PASSWORD_FILE=" + wrongPassword}, nil, "fix sasl-password"},
		{"mechanism the listener does not enable", "kdelay",
			[]string{"KDELAY_SASL_MECHANISM=OAUTHBEARER", "KDELAY_SASL_USERNAME=", "KDELAY_SASL_PASSWORD_FILE=", "KDELAY_SASL_OAUTH_TOKEN=t"}, nil, "set sasl-mechanism"},
		{"broker certificate the CA does not sign", "kdelay", []string{"KDELAY_TLS_CA_FILE=" + rogueCA}, nil, "not signed by a CA kdelay trusts"},
		{"plaintext to a TLS listener", "kdelay", []string{"KDELAY_TLS=false", "KDELAY_TLS_CA_FILE="}, nil, "set tls to true"},
		{"no client certificate for mTLS", "mtls", []string{"KDELAY_TLS_CERT_FILE=", "KDELAY_TLS_KEY_FILE="}, nil, "set tls-cert-file and tls-key-file"},
		{"client certificate the CA does not sign", "mtls", []string{"KDELAY_TLS_CERT_FILE=" + rogueCert, "KDELAY_TLS_KEY_FILE=" + rogueKey}, nil, "set tls-cert-file and tls-key-file"},
		{"no ACL on the ingress", "kdelay", nil, []string{"--topic-prefix", "forbidden"}, "WRITE on forbidden.ingress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"send", "--topic-prefix", s.prefix, "--target", s.target, "--delay", "1s"}, tt.args...)
			code, out, took := runWithin(t, 20*time.Second, s.command(tt.settings, tt.extra, append(args, "v")...))
			if code != 1 || !strings.Contains(out, tt.want) || took > 10*time.Second {
				t.Errorf("kdelay send: exit %d after %s:\n%s\nwant exit 1 within 10s saying %q", code, took.Round(time.Millisecond), out, tt.want)
			}
			for _, secret := range []string{s.broker.Password("kdelay"), "not-the-password"} {
				if strings.Contains(out, secret) {
					t.Errorf("the output shows a password:\n%s", out)
				}
			}
		})
	}

	t.Run("serve with a wrong password", func(t *testing.T) {
		t.Parallel()
		code, out, took := runWithin(t, 20*time.Second, s.command("kdelay", []string{"KDELAY_SASL_PASSWORD_FILE=" + wrongPassword},
			"serve", "--topic-prefix", s.prefix, "--group", s.prefix))
		if code != 1 || !strings.Contains(out, "fix sasl-password") || took > 10*time.Second {
			t.Errorf("kdelay serve: exit %d after %s:\n%s\nwant exit 1 within 10s naming sasl-password", code, took.Round(time.Millisecond), out)
		}
	})
}

// TestSecretsNotInHelp checks that no secret has a flag, and that --help
// shows none of the secrets set in the environment.
func TestSecretsNotInHelp(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-do-not-print"
	for _, cmd := range []string{"serve", "send", "tail", "bench"} {
		c := command(binary(t), t.TempDir(), cmd, "--help")
		c.Env = append(c.Env, "KDELAY_SASL_PASSWORD="+secret, "KDELAY_SASL_OAUTH_TOKEN="+secret)
		code, out, _ := runWithin(t, 10*time.Second, c)
		switch {
		case code != 0:
			t.Errorf("kdelay %s --help: exit %d:\n%s", cmd, code, out)
		case strings.Contains(out, secret):
			t.Errorf("kdelay %s --help shows a secret from the environment:\n%s", cmd, out)
		case strings.Contains(out, "--sasl-password "), strings.Contains(out, "--sasl-oauth-token "):
			t.Errorf("kdelay %s --help offers a flag for a secret:\n%s", cmd, out)
		case !strings.Contains(out, "--sasl-password-file"):
			t.Errorf("kdelay %s --help has no --sasl-password-file:\n%s", cmd, out)
		}
	}
}

// TestSecretsNotInStartLog checks the configuration serve logs at start: it
// is there, with the secrets redacted.
func TestSecretsNotInStartLog(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-do-not-log"
	// Nothing listens on port 1: serve logs its configuration, then fails
	// to reach the broker.
	c := command(binary(t), t.TempDir(), "serve", "--brokers", "127.0.0.1:1")
	c.Env = append(c.Env, "KDELAY_SASL_MECHANISM=PLAIN", "KDELAY_SASL_USERNAME=alice", "KDELAY_SASL_PASSWORD="+secret)
	_, out, _ := runWithin(t, 20*time.Second, c)
	switch {
	case strings.Contains(out, secret):
		t.Errorf("kdelay serve logged a secret:\n%s", out)
	case !strings.Contains(out, "msg=starting") || !strings.Contains(out, "config.sasl-password="+config.Redacted) ||
		!strings.Contains(out, "config.sasl-username=alice") || !strings.Contains(out, "config.brokers=127.0.0.1:1"):
		t.Errorf("kdelay serve did not log its configuration with the password redacted:\n%s", out)
	}
}
