package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/kdelay/kdelay/fleet"
)

// The dead letters a listing reads: the newest defaultListed, or as many
// as its limit asks, up to maxListed. Only those are read; the rest of the
// topic is counted by its offsets, so a page costs the same however many
// dead letters wait.
const (
	defaultListed = 100
	maxListed     = 10_000
)

// deadLettersPage lists the newest dead letters, those a filter matches.
type deadLettersPage struct {
	Topic          string
	Reason, Target string
	Limit          int
	Newest         fleet.Newest
	Letters        []fleet.DeadLetter // of Newest, those that match
	Filtered       bool
	Total          int // Newest.Total, for the page
	More           int // the limit that reads more, 0 when all are read
}

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request) {
	f := fleet.Filter{Reason: r.FormValue("reason"), Target: r.FormValue("target")}
	p := deadLettersPage{Topic: c.cfg.Fleet.Config().Topics.DLQ(), Reason: f.Reason, Target: f.Target, Filtered: !f.Empty()}
	var err error
	if p.Limit, err = limit(r.FormValue("limit")); err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	if p.Newest, err = c.cfg.Fleet.NewestDeadLetters(r.Context(), p.Limit); err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	p.Total = int(p.Newest.Total)
	for _, d := range p.Newest.Letters {
		if f.Match(d) {
			p.Letters = append(p.Letters, d)
		}
	}
	if !p.Newest.All && p.Limit < maxListed {
		p.More = min(p.Limit*10, maxListed)
	}
	c.render(w, r, http.StatusOK, "deadletters.html", "deadletters", "Dead letters", p)
}

// limit is how many dead letters the limit asked reads: defaultListed when
// none is asked.
func limit(asked string) (int, error) {
	if asked == "" {
		return defaultListed, nil
	}
	n, err := strconv.Atoi(asked)
	if err != nil || n < 1 || n > maxListed {
		return 0, fmt.Errorf("limit %q is not a number of dead letters from 1 to %d: the page reads the newest that many", asked, maxListed)
	}
	return n, nil
}

// replayPage asks to confirm a replay, or says what it did.
type replayPage struct {
	Reason, Target string
	All            bool
	Limit          int          // the newest dead letters chosen among
	Newest         fleet.Newest // those read
	Total          int          // Newest.Total, for the page
	More           int          // the limit that reads more, 0 when all are read
	Sources        []string
	Chosen         []planned        // before confirmation
	Done           []fleet.Replayed // after
	Written        int
}

// planned is a chosen dead letter and why a replay would refuse it, if it
// would.
type planned struct {
	Letter  fleet.DeadLetter
	Refused error
}

// replay replays the dead letters the form chooses, by the rules of kdelay
// dlq replay (fleet.ChooseNewest, fleet.Replay): the first POST shows what
// would be replayed, the second, with confirm=yes, replays it.
//
// It chooses among the newest dead letters only, as many as the listing
// read (limit), so that it costs what the listing costs however many wait:
// those ticked are among them, and "all that match" says when older ones
// were left out. Confirmed, "all that match" replays those its page showed
// (shown) and nothing else: a dead letter that arrived in between is not
// replayed unseen. A dead letter ticked or shown that newer ones have
// pushed out of the newest replays nothing.
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	p := replayPage{Reason: r.FormValue("reason"), Target: r.FormValue("target"), All: r.FormValue("all") == "1", Sources: r.Form["source"]}
	f := fleet.Filter{Reason: p.Reason, Target: p.Target}
	confirmed := r.FormValue("confirm") == "yes"
	var err error
	if p.Limit, err = limit(r.FormValue("limit")); err != nil {
		c.fail(w, r, http.StatusBadRequest, err)
		return
	}
	switch {
	case p.All && confirmed:
		f.Sources = sources(r.Form["shown"])
	case !p.All && len(p.Sources) == 0:
		c.fail(w, r, http.StatusBadRequest, errors.New("no dead letter selected: tick the ones to replay, or replay all that match"))
		return
	case !p.All:
		f.Sources = sources(p.Sources)
	}
	fl := c.cfg.Fleet
	chosen, newest, err := fl.ChooseNewest(r.Context(), f, p.Limit)
	p.Newest, p.Total = newest, int(newest.Total)
	if !newest.All && p.Limit < maxListed {
		p.More = min(p.Limit*10, maxListed)
	}
	if err != nil {
		c.fail(w, r, http.StatusConflict, err)
		return
	}
	if !confirmed {
		for _, d := range chosen {
			_, refused := d.Replay(fl.Config().Rules())
			p.Chosen = append(p.Chosen, planned{Letter: d, Refused: refused})
		}
		c.render(w, r, http.StatusOK, "replay.html", "deadletters", "Replay dead letters?", p)
		return
	}
	p.Done = fl.Replay(r.Context(), chosen)
	for _, d := range p.Done {
		if d.Refused == nil && d.Err == nil {
			p.Written++
		}
	}
	c.cfg.Logger.Info("console_replay", "filter", f.Describe(), "chosen", len(chosen), "replayed", p.Written, "sources", p.Sources, "user", user(r), "remote", r.RemoteAddr)
	c.render(w, r, http.StatusOK, "replay.html", "deadletters", "Replayed", p)
}

// sources is the set of the sources named.
func sources(named []string) map[string]bool {
	set := make(map[string]bool, len(named))
	for _, s := range named {
		set[s] = true
	}
	return set
}
