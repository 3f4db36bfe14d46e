package kafkatest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EnvSecure names the environment variable that points the security tests
// at a secured real broker: the security directory that
// `KAFKA_SECURITY=sasl_ssl scripts/local-kafka start` writes, holding
// kdelay.env, admin.env and mtls.env.
const EnvSecure = "KDELAY_TEST_SECURE"

// Secure is a secured broker as scripts/local-kafka sets it up: a SASL_SSL
// listener with SCRAM users admin (super user) and kdelay (ACLs on topics
// and groups starting with "kdelay" and on targets starting with "orders";
// none on the topic "forbidden"), and an mTLS listener where the client
// certificate of CN=kdelay is User:kdelay.
type Secure struct {
	Dir string
	t   testing.TB
}

// NewSecure returns the secured broker named by KDELAY_TEST_SECURE, and
// skips the test when it is not set.
func NewSecure(t testing.TB) *Secure {
	t.Helper()
	dir := os.Getenv(EnvSecure)
	if dir == "" {
		t.Skip(EnvSecure + " is not set: start a secured broker with KAFKA_SECURITY=sasl_ssl scripts/local-kafka start and set it to its security directory")
	}
	return &Secure{Dir: dir, t: t}
}

// Settings are the KDELAY_* variables, as NAME=value, of the file of
// settings for user ("kdelay", "admin" or "mtls"), as a person would
// source it.
func (s *Secure) Settings(user string) []string {
	s.t.Helper()
	path := filepath.Join(s.Dir, user+".env")
	f, err := os.Open(path)
	if err != nil {
		s.t.Fatalf("settings of %s: %v", user, err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kv, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export "); ok {
			env = append(env, kv)
		}
	}
	if err := sc.Err(); err != nil || len(env) == 0 {
		s.t.Fatalf("settings of %s in %s: %v, %d variables", user, path, err, len(env))
	}
	return env
}

// Password is the password of a SCRAM user.
func (s *Secure) Password(user string) string {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, user+".password"))
	if err != nil {
		s.t.Fatalf("password of %s: %v", user, err)
	}
	return strings.TrimSpace(string(b))
}

// SelfSigned writes a certificate for CN=cn, signed by itself and so
// trusted by nobody, and its key into dir; it returns both files. As a CA
// file it trusts no broker; as a client certificate no broker accepts it.
func SelfSigned(t testing.TB, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	for path, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "PRIVATE KEY", Bytes: pkcs8}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
