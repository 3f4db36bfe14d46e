package console

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
)

// csrfField is the form field an action's form carries its token in.
const csrfField = "csrf"

// action wraps a handler that changes something. It is refused, in this
// order: while the console is read-only; when the browser says another
// site's page sent it (http.CrossOriginProtection); and when the form does
// not carry the token the console's own pages give their forms. The token
// covers what the origin check lets through: a request with neither
// Sec-Fetch-Site nor Origin, which old browsers send and proxies may strip.
// Another site's page cannot read the console's pages, so it cannot learn
// the token.
func (c *Console) action(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !c.cfg.Actions {
			c.refuse(w, r, "read_only", "this console is read-only: it shows, and changes nothing. "+c.cfg.ActionsHelp)
			return
		}
		if err := c.sameSites.Check(r); err != nil {
			c.refuse(w, r, "cross_origin", "refused: the request came from a page of another site (cross-origin). Act from the console's own pages")
			return
		}
		if !hmac.Equal([]byte(r.PostFormValue(csrfField)), []byte(c.token(user(r)))) {
			c.refuse(w, r, "csrf_token", "refused: the form carries no valid CSRF token. Forms are good until the process serving the console restarts: reload the page and act again")
			return
		}
		h(w, r)
	}
}

// refuse answers 403 to an action, and logs who tried it.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, why, msg string) {
	c.cfg.Logger.Warn("console_action_refused", "reason", why, "path", r.URL.Path, "user", user(r), "remote", r.RemoteAddr)
	c.fail(w, r, http.StatusForbidden, errors.New(msg))
}

// token is the CSRF token of user's forms: an HMAC of the user under a
// secret made when the Console was, so it is good for one user, until the
// process restarts.
func (c *Console) token(user string) string {
	mac := hmac.New(sha256.New, c.secret)
	mac.Write([]byte("kdelay console action\x00" + user))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}
