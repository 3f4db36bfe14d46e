// Package console is kdelay's web console: an http.Handler that shows what
// waits in each level and when it moves on, lists and replays dead letters,
// finds one message by its id to cancel, reschedule or run it now, and
// lists the recurring schedules, to delete one. It reads and writes through
// Kafka alone (package fleet), so it runs beside kdelay serve (whose admin
// listener mounts it at /) or anywhere that reaches the brokers (kdelay
// console), or in a program of your own:
//
//	f, _ := fleet.New(fleet.Config{Brokers: brokers})
//	c, _ := console.New(console.Config{Fleet: f})
//	http.Handle("/kdelay/", http.StripPrefix("/kdelay", c))
//
// Given Config.Live (the *admin.Metrics of the process's forwarders), a Live
// page shows how late they deliver, per level.
//
// Its pages link to each other relatively, so it works under any prefix that
// ends in a slash. They are plain HTML forms, built into the binary: they
// work without JavaScript, and nothing but go build makes them.
//
// The console is read-only unless Config.Actions is set. An action (a
// replay, a command) is a POST that asks for confirmation first; it carries
// a CSRF token the console's own pages give their forms, and is refused
// without it or when the browser says another site's page sent it
// (http.CrossOriginProtection), so another page cannot make a visitor's
// browser replay or cancel. With Config.Credentials, every page asks for
// credentials (basic auth, or a bearer token); without, whoever reaches the
// listener may act, so turn Actions on without Credentials only on a
// listener that only operators reach (loopback, or behind an authenticating
// proxy).
package console

import (
	"cmp"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/kdelay/kdelay/fleet"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// searchesAtOnce is how many searches by id may run at once: each reads the
// pending records of every level with a consumer of its own.
const searchesAtOnce = 2

// Config configures a Console.
type Config struct {
	// Fleet is the fleet to show and act on. Required; the caller closes
	// it, after the Console's last request.
	Fleet *fleet.Fleet

	// Actions lets the console replay dead letters and write commands.
	// Default false: read-only.
	Actions bool

	// ActionsHelp is what a read-only console says, when asked to act,
	// about how to turn actions on where it runs. Default: set
	// console.Config.Actions.
	ActionsHelp string

	// Credentials, when set, are asked of every request: basic auth with
	// a name and its secret, or the secret alone as a bearer token
	// (ReadCredentials reads them from a file). Actions are logged with
	// the name. Default none: the console does not authenticate.
	Credentials []Credential

	// FindLimits bound a search by id. Default fleet.DefaultFindBytes,
	// 256 MiB, and fleet.DefaultFindTime, 30s.
	FindLimits fleet.FindLimits

	// Live, when set, is what the Live page shows: the deliveries of the
	// process serving the console, and how late (*admin.Metrics). Default
	// nil: no Live page, as for a console that runs apart from kdelay's
	// forwarders.
	Live Live

	// Logger receives a line per action, with what and from where.
	// Default: discard.
	Logger *slog.Logger

	// NowFunc is the clock. Default time.Now.
	NowFunc func() time.Time
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	c.ActionsHelp = cmp.Or(c.ActionsHelp, "Set console.Config.Actions to act.")
	c.FindLimits.MaxBytes = cmp.Or(c.FindLimits.MaxBytes, fleet.DefaultFindBytes)
	c.FindLimits.MaxTime = cmp.Or(c.FindLimits.MaxTime, fleet.DefaultFindTime)
	return c
}

func (c Config) validate() error {
	if c.Fleet == nil {
		return errors.New("console: no Fleet; make one with fleet.New and pass it")
	}
	seen := credentialsSeen{names: map[string]bool{}, secrets: map[string]bool{}}
	for i, cr := range c.Credentials {
		if err := seen.check(cr); err != nil {
			return fmt.Errorf("console: Credentials[%d] %w", i, err)
		}
	}
	return nil
}

// Console is the web console's handler.
type Console struct {
	cfg         Config
	pages       *template.Template
	mux         *http.ServeMux
	searches    chan struct{} // a slot per search running
	sameSites   *http.CrossOriginProtection
	secret      []byte // of the CSRF tokens: see token
	credentials []hashedCredential
	readings    readings // of Config.Live
}

// New checks cfg and builds the handler.
func New(cfg Config) (*Console, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pages, err := template.New("").Funcs(funcs(cfg.NowFunc)).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, err // a template that does not parse: a bug, found by any test
	}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, pages: pages, mux: http.NewServeMux(), searches: make(chan struct{}, searchesAtOnce),
		sameSites: http.NewCrossOriginProtection(), secret: make([]byte, 32), credentials: hash(cfg.Credentials)}
	rand.Read(c.secret) // never fails: see crypto/rand.Read
	c.mux.HandleFunc("GET /{$}", c.levels)
	c.mux.HandleFunc("GET /deadletters", c.deadLetters)
	c.mux.HandleFunc("POST /replay", c.action(c.replay))
	c.mux.HandleFunc("GET /find", c.find)
	c.mux.HandleFunc("POST /command", c.action(c.command))
	c.mux.HandleFunc("GET /schedules", c.schedules)
	c.mux.HandleFunc("POST /delete-schedule", c.action(c.deleteSchedule))
	c.mux.HandleFunc("GET /live", c.live)
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	return c, nil
}

// ServeHTTP serves the console's pages, to a user with credentials when
// the console asks for them.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(c.credentials) > 0 {
		name, ok := c.authenticate(r)
		if !ok {
			c.signIn(w, r)
			return
		}
		r = withUser(r, name)
	}
	c.mux.ServeHTTP(w, r)
}

// page is what every page's template gets.
type page struct {
	Title   string
	Nav     string // which link of the navigation is this page
	Actions bool
	Live    bool   // whether there is a Live page
	CSRF    string // the token every action's form carries
	User    string // signed in as, "" when the console does not ask
	Now     time.Time
	Data    any
}

// pageFor is the page for r.
func (c *Console) pageFor(r *http.Request, nav, title string, data any) page {
	p := page{Title: title, Nav: nav, Actions: c.cfg.Actions, Live: c.cfg.Live != nil, User: user(r), Now: c.cfg.NowFunc(), Data: data}
	if p.Actions {
		p.CSRF = c.token(p.User)
	}
	return p
}

// render writes the page named name.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name, nav, title string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages.ExecuteTemplate(w, name, c.pageFor(r, nav, title, data)); err != nil {
		c.cfg.Logger.Warn("console_render_failed", "page", name, "err", err)
	}
}

// fail answers with a page that says what went wrong.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	c.render(w, r, status, "error.html", "", "Error", err.Error())
}
