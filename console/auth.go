package console

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// minSecret is the shortest secret a credentials file may hold: a secret
// is a password a browser sends with every request, so it must not be one
// a person guesses. `openssl rand -base64 24` makes one of 32 characters.
const minSecret = 16

// Credential is one who may use a console that asks for credentials: the
// name its actions are logged with, and its secret, sent by a browser as
// basic auth (name and secret) or by a program as a bearer token (the
// secret alone).
type Credential struct {
	Name   string
	Secret string
}

// ReadCredentials reads a credentials file: a line per user, name:secret.
// The name is what the console logs; the secret, everything after the first
// colon, is at least 16 characters and differs from every other line's,
// since a bearer token is the secret alone and must name one user. Blank
// lines and lines that start with # are skipped.
//
//	# who may use the kdelay console
//	alice:Jx8kq2Vb0pXw7sLr4NcT1yZe
//	deploy-bot:Q3mN9vB6xC2zL8kJ5hG1fD4s
func ReadCredentials(path string) ([]Credential, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cs, err := parseCredentials(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cs, nil
}

func parseCredentials(b []byte) ([]Credential, error) {
	var cs []Credential
	seen := credentialsSeen{names: map[string]bool{}, secrets: map[string]bool{}}
	lines := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secret, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("line %d is not name:secret", n) // not repeated: it may be a secret
		}
		cr := Credential{Name: name, Secret: secret}
		if err := seen.check(cr); err != nil {
			return nil, fmt.Errorf("line %d %w", n, err)
		}
		cs = append(cs, cr)
	}
	if err := lines.Err(); err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, errors.New("no credentials: write a line per user, name:secret")
	}
	return cs, nil
}

// credentialsSeen are the names and secrets of the credentials checked so
// far.
type credentialsSeen struct {
	names, secrets map[string]bool
}

// check says what is wrong with cr, if anything, beside those seen: a
// secret a person could guess, or a name or secret another has.
func (seen credentialsSeen) check(cr Credential) error {
	switch {
	case cr.Name == "":
		return errors.New("has no name: write name:secret")
	case len(cr.Secret) < minSecret:
		return fmt.Errorf("(%s): the secret has %d characters; use at least %d, e.g. the output of openssl rand -base64 24", cr.Name, len(cr.Secret), minSecret)
	case seen.names[cr.Name]:
		return fmt.Errorf("(%s): the name is another's too; one per user", cr.Name)
	case seen.secrets[cr.Secret]:
		return fmt.Errorf("(%s): the secret is another's too; give each user a secret of their own, so that a bearer token names one", cr.Name)
	}
	seen.names[cr.Name], seen.secrets[cr.Secret] = true, true
	return nil
}

// authenticate is the name of the user r's Authorization header proves, or
// false. Every secret is compared, in time that does not depend on where
// they differ, so a response's timing tells nothing of a secret.
func (c *Console) authenticate(r *http.Request) (string, bool) {
	name, secret, basic := r.BasicAuth()
	if !basic {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			return "", false
		}
		secret = strings.TrimSpace(token)
	}
	given := sha256.Sum256([]byte(secret))
	found := ""
	for _, cr := range c.credentials {
		match := subtle.ConstantTimeCompare(given[:], cr.secret[:]) == 1
		if match && (!basic || name == cr.Name) {
			found = cr.Name
		}
	}
	return found, found != ""
}

// hashedCredential is a Credential with its secret hashed to a fixed
// length, for a constant-time comparison.
type hashedCredential struct {
	Name   string
	secret [sha256.Size]byte
}

func hash(cs []Credential) []hashedCredential {
	out := make([]hashedCredential, len(cs))
	for i, cr := range cs {
		out[i] = hashedCredential{Name: cr.Name, secret: sha256.Sum256([]byte(cr.Secret))}
	}
	return out
}

// signIn asks for credentials: a browser shows its sign-in dialog on a 401
// that names the Basic scheme.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Basic realm="kdelay console", charset="UTF-8"`)
	if r.Header.Get("Authorization") != "" {
		c.cfg.Logger.Warn("console_sign_in_refused", "remote", r.RemoteAddr)
	}
	c.fail(w, r, http.StatusUnauthorized, errors.New("this console asks for credentials: sign in with a name and secret of its credentials file, or send the secret as a bearer token"))
}

// userKey is the context key of the user a request was authenticated as.
type userKey struct{}

// user is the name r was authenticated as, "" when the console does not
// ask for credentials.
func user(r *http.Request) string {
	name, _ := r.Context().Value(userKey{}).(string)
	return name
}

func withUser(r *http.Request, name string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), userKey{}, name))
}
