package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The SASL mechanisms kdelay speaks, as Kafka names them (sasl.mechanism).
const (
	MechanismPlain       = "PLAIN"
	MechanismScramSHA256 = "SCRAM-SHA-256"
	MechanismScramSHA512 = "SCRAM-SHA-512"
	MechanismOAuthBearer = "OAUTHBEARER"
)

// securityKeys are the settings of a connection to a secured cluster. docs/DEPLOYING.md
// ("A secured cluster") maps Kafka's client properties (security.protocol, ssl.*, sasl.*)
// onto them.
func securityKeys() []key {
	return []key{
		{"tls", kindBool, "false", "connect to the brokers over TLS (security.protocol SSL or SASL_SSL)"},
		{"tls-ca-file", kindString, "", "PEM file of the CAs that sign the brokers' certificates; empty trusts the system's CAs"},
		{"tls-cert-file", kindString, "", "PEM client certificate, for brokers that require one (mTLS); with tls-key-file"},
		{"tls-key-file", kindString, "", "PEM private key of tls-cert-file, unencrypted"},
		{"tls-server-name", kindString, "", "name the brokers' certificates must hold; empty checks each broker's host name"},
		{"tls-insecure-skip-verify", kindBool, "false", "accept any broker certificate: for tests only, never in production"},
		{"sasl-mechanism", kindString, "", "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER; empty for none"},
		{"sasl-username", kindString, "", "SASL user name, for PLAIN and SCRAM"},
		{"sasl-password", kindString, "", "SASL password: from KDELAY_SASL_PASSWORD or the config file only, never a flag"},
		{"sasl-password-file", kindString, "", "file holding the SASL password (one trailing newline is ignored)"},
		{"sasl-oauth-token", kindString, "", "OAUTHBEARER token: from KDELAY_SASL_OAUTH_TOKEN or the config file only, never a flag"},
		{"sasl-oauth-token-file", kindString, "", "file holding the OAUTHBEARER token, read again at every authentication so that a renewed token is used"},
	}
}

// isSecurity reports whether a key is a tls or sasl setting.
func isSecurity(name string) bool {
	return name == "tls" || strings.HasPrefix(name, "tls-") || strings.HasPrefix(name, "sasl-")
}

// isSecret reports whether a key holds a secret. A secret has no flag: a
// command line is readable by every user of the machine (ps, /proc), and
// stays in shell history. Its value is never written in a message.
func isSecret(name string) bool {
	return name == "sasl-password" || name == "sasl-oauth-token"
}

// ClientOpts are the options every Kafka client of kdelay needs to reach
// the brokers: TLS and SASL, none for a plaintext cluster. serve, send, tail
// and bench all take them from here.
func (c Config) ClientOpts() []kgo.Opt {
	var opts []kgo.Opt
	if c.TLS != nil {
		// kgo clones it for every dial, and sets ServerName to the host of
		// the broker dialled when tls-server-name is empty.
		opts = append(opts, kgo.DialTLSConfig(c.TLS))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	return opts
}

// SecurityEnviron is the tls and sasl settings as KDELAY_* variables, for a
// kdelay process this one starts (bench's kdelay serve): an environment is
// not on the command line, where every user of the machine could read a
// password, and the child reads the password file itself.
func (c Config) SecurityEnviron() []string { return slices.Clone(c.security) }

func (d *decoder) securityEnviron() []string {
	var env []string
	for _, k := range securityKeys() {
		if v := d.text(k.name); v != k.def {
			env = append(env, envName(k.name)+"="+v)
		}
	}
	return env
}

// tls reads the tls settings. It loads the files now, so that a missing or
// unreadable one is reported at start, naming its key.
func (d *decoder) tls() *tls.Config {
	on := d.boolean("tls")
	if !on {
		if name := d.firstSet(func(n string) bool { return strings.HasPrefix(n, "tls-") }); name != "" {
			d.fail(name, "is set but tls is false; set tls to true (--tls, KDELAY_TLS=true) or remove %s", name)
		}
		return nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         d.text("tls-server-name"),
		InsecureSkipVerify: d.boolean("tls-insecure-skip-verify"),
	}
	if path := d.text("tls-ca-file"); path != "" {
		c.RootCAs = d.certPool("tls-ca-file", path)
	}
	cert, key := d.text("tls-cert-file"), d.text("tls-key-file")
	switch {
	case cert == "" && key == "":
	case cert == "":
		d.fail("tls-cert-file", "is empty but tls-key-file is set; name the client certificate too, or remove tls-key-file")
	case key == "":
		d.fail("tls-key-file", "is empty but tls-cert-file is set; name the certificate's private key too, or remove tls-cert-file")
	default:
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			d.fail("tls-cert-file", "%s with tls-key-file %s: %v; give a PEM certificate and its unencrypted PEM private key", cert, key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c
}

func (d *decoder) certPool(name, path string) *x509.CertPool {
	pem, err := os.ReadFile(path)
	if err != nil {
		d.fail(name, "%v; name a readable PEM file of CA certificates", err)
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		d.fail(name, "%s holds no PEM certificate; give the CA certificate (-----BEGIN CERTIFICATE-----) that signs the brokers'", path)
	}
	return pool
}

// sasl reads the sasl settings into the mechanism franz-go authenticates
// with. The password is read now; the token file at every authentication.
func (d *decoder) sasl() sasl.Mechanism {
	mechanism := strings.ToUpper(d.text("sasl-mechanism"))
	user := d.text("sasl-username")
	switch mechanism {
	case "":
		if name := d.firstSet(func(n string) bool { return strings.HasPrefix(n, "sasl-") }); name != "" {
			d.fail(name, "is set but sasl-mechanism is empty; set sasl-mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER) or remove %s", name)
		}
		return nil
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		d.unused(mechanism, "sasl-oauth-token", "sasl-oauth-token-file")
		if user == "" {
			d.fail("sasl-username", "is empty, and %s needs a user name; set sasl-username", mechanism)
		}
		pass := d.secret("sasl-password", "sasl-password-file", mechanism)
		switch mechanism {
		case MechanismPlain:
			return plain.Auth{User: user, Pass: pass}.AsMechanism()
		case MechanismScramSHA256:
			return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()
		default:
			return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
		}
	case MechanismOAuthBearer:
		d.unused(mechanism, "sasl-username", "sasl-password", "sasl-password-file")
		return d.oauth()
	}
	d.fail("sasl-mechanism", "%q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; use the one your cluster's listener enables (sasl.enabled.mechanisms)", mechanism)
	return nil
}

// secret is the value of the secret key, or of the file its fileKey names.
func (d *decoder) secret(key, fileKey, mechanism string) string {
	value, path := d.text(key), d.text(fileKey)
	switch {
	case value != "" && path != "":
		d.fail(key, "and %s are both set; keep one", fileKey)
	case path != "":
		s, err := readSecret(path)
		if err != nil {
			d.fail(fileKey, "%v; name a readable file that holds it", err)
		}
		return s
	case value == "":
		d.fail(fileKey, "and %s are empty, and %s needs one; name a file with %s, or set %s", key, mechanism, fileKey, envName(key))
	}
	return value
}

// oauth is the OAUTHBEARER mechanism with a static token, or with the token
// in a file read at every authentication: whatever renews the token (a
// sidecar, a cron job) rewrites the file, and the next connection (kdelay
// also authenticates again when the broker's connections.max.reauth.ms asks)
// uses the new one.
func (d *decoder) oauth() sasl.Mechanism {
	token := d.secret("sasl-oauth-token", "sasl-oauth-token-file", MechanismOAuthBearer)
	path := d.text("sasl-oauth-token-file")
	if path == "" {
		return oauth.Auth{Token: token}.AsMechanism()
	}
	return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
		t, err := readSecret(path)
		if err != nil {
			return oauth.Auth{}, fmt.Errorf("sasl-oauth-token-file: %w", err)
		}
		return oauth.Auth{Token: t}, nil
	})
}

// readSecret reads a password or token file, without the newline an editor
// or echo leaves at its end. An empty file is an error: it is always a
// mistake, and the broker's answer to an empty secret says less.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}

// unused reports the keys set that mechanism does not use: a setting
// silently ignored would look like one that works.
func (d *decoder) unused(mechanism string, names ...string) {
	for _, name := range names {
		if d.text(name) != "" {
			d.fail(name, "is set but sasl-mechanism %s does not use it; remove it", mechanism)
		}
	}
}

// boolean is true or false (also 1, 0, t, f, in any case).
func (d *decoder) boolean(name string) bool {
	s := d.text(name)
	v, err := strconv.ParseBool(s)
	if err != nil {
		d.fail(name, "%q is neither true nor false; write true or false", s)
	}
	return v
}

// firstSet is the first key, in the order of keys(), for which match is
// true and that a source set to something other than its default; "" if
// none.
func (d *decoder) firstSet(match func(name string) bool) string {
	for _, k := range keys() {
		if match(k.name) && d.from[k.name] != "" && d.text(k.name) != k.def {
			return k.name
		}
	}
	return ""
}
