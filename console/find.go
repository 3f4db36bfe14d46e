package console

import (
	"fmt"
	"net/http"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/fleet"
)

// findPage is the search form, and what a search found.
type findPage struct {
	ID       string
	Limits   fleet.FindLimits
	Search   *fleet.Search
	Progress fleet.Search
}

// find searches for the message with the id asked, and streams the page as
// it goes: a line of progress every 500ms, then the result. A browser shows
// each part as it arrives, without JavaScript.
func (c *Console) find(w http.ResponseWriter, r *http.Request) {
	p := findPage{ID: r.FormValue("id"), Limits: c.cfg.FindLimits}
	if p.ID == "" {
		c.render(w, r, http.StatusOK, "find-page", "find", "Find a message", p)
		return
	}
	select {
	case c.searches <- struct{}{}:
		defer func() { <-c.searches }()
	default:
		c.fail(w, r, http.StatusServiceUnavailable, fmt.Errorf("%d searches are running already; try again once one has ended", searchesAtOnce))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	rc := http.NewResponseController(w)
	pg := c.pageFor(r, "find", "Find "+p.ID, &p)
	c.stream(w, rc, "find-top", pg)
	s, err := c.cfg.Fleet.Find(r.Context(), p.ID, c.cfg.FindLimits, pg.Now, func(s fleet.Search) {
		p.Progress = s
		c.stream(w, rc, "find-progress", pg)
	})
	if err != nil {
		s.Stopped = err.Error()
	}
	p.Search = &s
	c.stream(w, rc, "find-result", pg)
}

// stream writes one part of a streamed page and sends it at once.
func (c *Console) stream(w http.ResponseWriter, rc *http.ResponseController, name string, p page) {
	if err := c.pages.ExecuteTemplate(w, name, p); err != nil {
		c.cfg.Logger.Warn("console_render_failed", "page", name, "err", err)
	}
	_ = rc.Flush() // a writer that cannot flush sends the page whole at the end
}

// commandPage asks to confirm a command, or says it was written.
type commandPage struct {
	Name, ID, Delay, At string
	WillDo              string
	Written             string // where it was written, once it was
}

// command writes a cancel, reschedule or run-now for an id to the control
// topic with the code of the kdelay commands of those names
// (fleet.CheckDue, fleet.CommandRecord): the first POST says what kdelay
// will do, the second, with confirm=yes, writes it.
func (c *Console) command(w http.ResponseWriter, r *http.Request) {
	p := commandPage{Name: r.FormValue("name"), ID: r.FormValue("id"), Delay: r.FormValue("delay"), At: r.FormValue("at")}
	switch p.Name {
	case kdelay.CommandCancel, kdelay.CommandReschedule, kdelay.CommandRunNow:
	default:
		c.fail(w, r, http.StatusBadRequest, fmt.Errorf("no command %q: use cancel, reschedule or run-now", p.Name))
		return
	}
	if p.Name != kdelay.CommandReschedule {
		p.Delay, p.At = "", "" // only a reschedule takes a time
	}
	if err := fleet.CheckDue(p.Delay, p.At); err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	fl := c.cfg.Fleet
	// Built again on confirmation: a delay counts from when the command
	// is written, not from when it was asked.
	now := c.cfg.NowFunc()
	rec, cmd, err := fleet.CommandRecord(p.Name, p.ID, p.Delay, p.At, fl.Config().Rules(), now)
	if err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	p.WillDo = fleet.WillDo(cmd, rec.Timestamp)
	if r.FormValue("confirm") != "yes" {
		c.render(w, r, http.StatusOK, "command.html", "find", "Confirm "+p.Name, p)
		return
	}
	err = fl.WriteCommand(r.Context(), rec)
	if err == nil {
		p.Written = kdelay.Source(rec.Topic, rec.Partition, rec.Offset)
	}
	// Written or not, an action someone took: the log says who and what.
	attrs := []any{"command", p.Name, "id", p.ID, "due", cmd.Due, "user", user(r), "remote", r.RemoteAddr}
	if err != nil {
		c.cfg.Logger.Warn("console_command_failed", append(attrs, "err", err)...)
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("%s %s not written: %w", p.Name, p.ID, err))
		return
	}
	c.cfg.Logger.Info("console_command", append(attrs, "written", p.Written)...)
	c.render(w, r, http.StatusOK, "command.html", "find", p.Name+" written", p)
}
