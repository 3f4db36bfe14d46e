// Package console is kdelay's web console: an http.Handler that shows what
// waits in each level and when it moves on, lists and replays dead letters,
// and finds one message by its id to cancel, reschedule or run it now. It
// reads and writes through Kafka alone (package fleet), so it runs beside
// kdelay serve (whose admin listener mounts it at /) or anywhere that
// reaches the brokers (kdelay console), or in a program of your own:
//
//	f, _ := fleet.New(fleet.Config{Brokers: brokers})
//	c, _ := console.New(console.Config{Fleet: f})
//	http.Handle("/kdelay/", http.StripPrefix("/kdelay", c))
//
// Its pages link to each other relatively, so it works under any prefix that
// ends in a slash. They are plain HTML forms, built into the binary: they
// work without JavaScript, and nothing but go build makes them.
//
// The console is read-only unless Config.Actions is set. An action (a
// replay, a command) is a POST that asks for confirmation first, and is
// refused when the browser says the request came from another site
// (http.CrossOriginProtection), so another page cannot make a visitor's
// browser replay or cancel. It does not authenticate: whoever reaches the
// listener may act, so turn Actions on only on a listener that only
// operators reach (loopback, or behind an authenticating proxy).
package console

import (
	"cmp"
	"embed"
	"errors"
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

	// FindLimits bound a search by id. Default fleet.DefaultFindBytes,
	// 256 MiB, and fleet.DefaultFindTime, 30s.
	FindLimits fleet.FindLimits

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
	c.FindLimits.MaxBytes = cmp.Or(c.FindLimits.MaxBytes, fleet.DefaultFindBytes)
	c.FindLimits.MaxTime = cmp.Or(c.FindLimits.MaxTime, fleet.DefaultFindTime)
	return c
}

func (c Config) validate() error {
	if c.Fleet == nil {
		return errors.New("console: no Fleet; make one with fleet.New and pass it")
	}
	return nil
}

// Console is the web console's handler.
type Console struct {
	cfg       Config
	pages     *template.Template
	mux       *http.ServeMux
	searches  chan struct{} // a slot per search running
	sameSites *http.CrossOriginProtection
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
		sameSites: http.NewCrossOriginProtection()}
	c.mux.HandleFunc("GET /{$}", c.levels)
	c.mux.HandleFunc("GET /deadletters", c.deadLetters)
	c.mux.HandleFunc("POST /replay", c.action(c.replay))
	c.mux.HandleFunc("GET /find", c.find)
	c.mux.HandleFunc("POST /command", c.action(c.command))
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	return c, nil
}

// ServeHTTP serves the console's pages.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.mux.ServeHTTP(w, r) }

// action wraps a handler that changes something: refused while the console
// is read-only, and for a request another site's page made the browser
// send.
func (c *Console) action(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !c.cfg.Actions {
			c.fail(w, http.StatusForbidden, errors.New("this console is read-only: it shows, and changes nothing. kdelay serve's admin listener allows actions on loopback only; kdelay console never does"))
			return
		}
		if err := c.sameSites.Check(r); err != nil {
			c.fail(w, http.StatusForbidden, errors.New("refused: the request came from a page of another site (cross-origin). Act from the console's own pages"))
			return
		}
		h(w, r)
	}
}

// page is what every page's template gets.
type page struct {
	Title   string
	Nav     string // which link of the navigation is this page
	Actions bool
	Now     time.Time
	Data    any
}

// render writes the page named name.
func (c *Console) render(w http.ResponseWriter, status int, name, nav, title string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	p := page{Title: title, Nav: nav, Actions: c.cfg.Actions, Now: c.cfg.NowFunc(), Data: data}
	if err := c.pages.ExecuteTemplate(w, name, p); err != nil {
		c.cfg.Logger.Warn("console_render_failed", "page", name, "err", err)
	}
}

// fail answers with a page that says what went wrong.
func (c *Console) fail(w http.ResponseWriter, status int, err error) {
	c.render(w, status, "error.html", "", "Error", err.Error())
}
