package config

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kdelay/kdelay/kafkatest"
)

// secretValue is a password no message may ever show.
const secretValue = "hunter2-do-not-print"

// files are a certificate, its key and a password file for the tests.
type files struct{ cert, key, password string }

func securityFiles(t *testing.T) files {
	t.Helper()
	dir := t.TempDir()
	cert, key := kafkatest.SelfSigned(t, dir, "client")
	password := filepath.Join(dir, "password")
	if err := os.WriteFile(password, []byte(secretValue+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return files{cert, key, password}
}

func TestSecuritySettings(t *testing.T) {
	t.Parallel()
	f := securityFiles(t)
	brokers := "KDELAY_BROKERS=kafka:9093"
	tests := []struct {
		name          string
		env           []string
		tls           bool
		mechanism     string
		clientCert    bool
		wantClientOpt int
	}{
		{"plaintext by default", []string{brokers}, false, "", false, 0},
		{"TLS with the system's CAs", []string{brokers, "KDELAY_TLS=true"}, true, "", false, 1},
		{"mTLS", []string{brokers, "KDELAY_TLS=1", "KDELAY_TLS_CA_FILE=" + f.cert, "KDELAY_TLS_CERT_FILE=" + f.cert, "KDELAY_TLS_KEY_FILE=" + f.key}, true, "", true, 1},
		{"SCRAM-SHA-512 over TLS, password from a file", []string{brokers, "KDELAY_TLS=true", "KDELAY_SASL_MECHANISM=scram-sha-512", "KDELAY_SASL_USERNAME=kdelay", "KDELAY_SASL_PASSWORD_FILE=" + f.password}, true, MechanismScramSHA512, false, 2},
		{"SCRAM-SHA-256, password from the environment", []string{brokers, "KDELAY_SASL_MECHANISM=SCRAM-SHA-256", "KDELAY_SASL_USERNAME=kdelay", "KDELAY_SASL_PASSWORD=" + secretValue}, false, MechanismScramSHA256, false, 1},
		{"PLAIN", []string{brokers, "KDELAY_TLS=true", "KDELAY_SASL_MECHANISM=PLAIN", "KDELAY_SASL_USERNAME=kdelay", "KDELAY_SASL_PASSWORD=" + secretValue}, true, MechanismPlain, false, 2},
		{"OAUTHBEARER with a static token", []string{brokers, "KDELAY_TLS=true", "KDELAY_SASL_MECHANISM=OAUTHBEARER", "KDELAY_SASL_OAUTH_TOKEN=" + secretValue}, true, MechanismOAuthBearer, false, 2},
		{"OAUTHBEARER with a token file", []string{brokers, "KDELAY_TLS=true", "KDELAY_SASL_MECHANISM=OAUTHBEARER", "KDELAY_SASL_OAUTH_TOKEN_FILE=" + f.password}, true, MechanismOAuthBearer, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, sources{env: tt.env})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if (c.TLS != nil) != tt.tls {
				t.Errorf("TLS = %v, want TLS %v", c.TLS, tt.tls)
			}
			if c.TLS != nil && (len(c.TLS.Certificates) == 1) != tt.clientCert {
				t.Errorf("client certificates: %d, want one: %v", len(c.TLS.Certificates), tt.clientCert)
			}
			got := ""
			if c.SASL != nil {
				got = c.SASL.Name()
			}
			if got != tt.mechanism {
				t.Errorf("SASL mechanism %q, want %q", got, tt.mechanism)
			}
			if n := len(c.ClientOpts()); n != tt.wantClientOpt {
				t.Errorf("ClientOpts gives %d options, want %d", n, tt.wantClientOpt)
			}
		})
	}
}

// TestSecurityFlags checks that the tls and sasl flags work like every
// other, and that a secret has no flag at all.
func TestSecurityFlags(t *testing.T) {
	t.Parallel()
	f := securityFiles(t)
	c, err := load(t, sources{args: []string{"--brokers=kafka:9093", "--tls", "--tls-server-name=kafka.internal",
		"--sasl-mechanism=SCRAM-SHA-512", "--sasl-username=kdelay", "--sasl-password-file=" + f.password}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.TLS == nil || c.TLS.ServerName != "kafka.internal" || c.SASL == nil {
		t.Errorf("--tls --tls-server-name kafka.internal --sasl-mechanism ...: TLS %+v, SASL %v", c.TLS, c.SASL)
	}
	clientFlags := func(fs *pflag.FlagSet) { AddClientFlags(fs) }
	for _, add := range []func(*pflag.FlagSet){AddFlags, clientFlags, AddSecurityFlags} {
		fs := pflag.NewFlagSet("kdelay", pflag.ContinueOnError)
		add(fs)
		for _, secret := range []string{"sasl-password", "sasl-oauth-token"} {
			if fs.Lookup(secret) != nil {
				t.Errorf("--%s exists: a secret on the command line is visible to every user of the machine", secret)
			}
		}
		if fs.Lookup("sasl-password-file") == nil || fs.Lookup("tls-ca-file") == nil {
			t.Errorf("--sasl-password-file or --tls-ca-file missing")
		}
	}
}

// TestSecurityProblems checks that each mistake is reported at start, naming
// the key and the fix, and never showing a secret.
func TestSecurityProblems(t *testing.T) {
	t.Parallel()
	f := securityFiles(t)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	brokers := "KDELAY_BROKERS=kafka:9093"
	scram := []string{brokers, "KDELAY_TLS=true", "KDELAY_SASL_MECHANISM=SCRAM-SHA-512", "KDELAY_SASL_USERNAME=kdelay"}
	tests := []struct {
		name     string
		env      []string
		key, fix string
	}{
		{"a tls setting with tls off", []string{brokers, "KDELAY_TLS_CA_FILE=" + f.cert}, "tls-ca-file", "set tls to true"},
		{"tls not a boolean", []string{brokers, "KDELAY_TLS=yes please"}, "tls", "write true or false"},
		{"a missing CA file", []string{brokers, "KDELAY_TLS=true", "KDELAY_TLS_CA_FILE=/nonexistent/ca.pem"}, "tls-ca-file", "name a readable PEM file"},
		{"a CA file with no certificate", []string{brokers, "KDELAY_TLS=true", "KDELAY_TLS_CA_FILE=" + f.key}, "tls-ca-file", "holds no PEM certificate"},
		{"a certificate without its key", []string{brokers, "KDELAY_TLS=true", "KDELAY_TLS_CERT_FILE=" + f.cert}, "tls-key-file", "name the certificate's private key"},
		{"a key that is not the certificate's", []string{brokers, "KDELAY_TLS=true", "KDELAY_TLS_CERT_FILE=" + f.cert, "KDELAY_TLS_KEY_FILE=" + f.password}, "tls-cert-file", "unencrypted PEM private key"},
		{"an unknown mechanism", append(scram[:3:3], "KDELAY_SASL_MECHANISM=GSSAPI"), "sasl-mechanism", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"},
		{"a username without a mechanism", []string{brokers, "KDELAY_SASL_USERNAME=kdelay"}, "sasl-username", "set sasl-mechanism"},
		{"SCRAM without a username", []string{brokers, "KDELAY_SASL_MECHANISM=SCRAM-SHA-512", "KDELAY_SASL_PASSWORD=" + secretValue}, "sasl-username", "set sasl-username"},
		{"SCRAM without a password", scram, "sasl-password-file", "KDELAY_SASL_PASSWORD"},
		{"a password twice", append(scram, "KDELAY_SASL_PASSWORD="+secretValue, "KDELAY_SASL_PASSWORD_FILE="+f.password), "sasl-password", "keep one"},
		{"a missing password file", append(scram, "KDELAY_SASL_PASSWORD_FILE=/nonexistent/password"), "sasl-password-file", "readable file"},
		{"an empty password file", append(scram, "KDELAY_SASL_PASSWORD_FILE="+empty), "sasl-password-file", "is empty"},
		{"a password with OAUTHBEARER", []string{brokers, "KDELAY_SASL_MECHANISM=OAUTHBEARER", "KDELAY_SASL_OAUTH_TOKEN=t", "KDELAY_SASL_PASSWORD=" + secretValue}, "sasl-password", "does not use it"},
		{"security with the embedded broker", []string{"KDELAY_SASL_MECHANISM=PLAIN", "KDELAY_SASL_USERNAME=kdelay", "KDELAY_SASL_PASSWORD=" + secretValue}, "sasl-mechanism", "set brokers to your secured cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, sources{env: tt.env})
			if err == nil {
				t.Fatalf("Load accepted %v", tt.env)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.key+": ") || !strings.Contains(msg, tt.fix) {
				t.Errorf("error:\n%v\nwant it to name %s and say %q", msg, tt.key, tt.fix)
			}
			if strings.Contains(msg, secretValue) {
				t.Errorf("error shows the secret:\n%v", msg)
			}
		})
	}
}

// TestOAuthTokenFileReread checks that a renewed token is used at the next
// authentication, without a restart.
func TestOAuthTokenFileReread(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "token")
	write := func(token string) {
		if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first-token")
	c, err := load(t, sources{env: []string{"KDELAY_BROKERS=kafka:9093", "KDELAY_SASL_MECHANISM=OAUTHBEARER", "KDELAY_SASL_OAUTH_TOKEN_FILE=" + path}})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for _, token := range []string{"first-token", "renewed-token"} {
		write(token)
		_, msg, err := c.SASL.Authenticate(context.Background(), "kafka:9093")
		if err != nil {
			t.Fatalf("authenticate: %v", err)
		}
		if !strings.Contains(string(msg), "auth=Bearer "+token) {
			t.Errorf("authentication with the file holding %s sent %q", token, msg)
		}
	}
}
