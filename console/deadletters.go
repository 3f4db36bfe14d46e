package console

import (
	"errors"
	"net/http"

	"github.com/kdelay/kdelay/fleet"
)

// listedAtMost is how many dead letters a listing shows: the rest are
// counted, and a filter narrows them.
const listedAtMost = 500

// deadLettersPage lists the dead letters a filter matches.
type deadLettersPage struct {
	Topic          string
	Reason, Target string
	Letters        []fleet.DeadLetter
	Matched, Read  int
}

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request) {
	f := fleet.Filter{Reason: r.FormValue("reason"), Target: r.FormValue("target")}
	p := deadLettersPage{Topic: c.cfg.Fleet.Config().Topics.DLQ(), Reason: f.Reason, Target: f.Target}
	err := c.cfg.Fleet.DeadLetters(r.Context(), nil, func(d fleet.DeadLetter) {
		p.Read++
		if !f.Match(d) {
			return
		}
		p.Matched++
		if len(p.Letters) < listedAtMost {
			p.Letters = append(p.Letters, d)
		}
	})
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	c.render(w, r, http.StatusOK, "deadletters.html", "deadletters", "Dead letters", p)
}

// replayPage asks to confirm a replay, or says what it did.
type replayPage struct {
	Reason, Target string
	All            bool
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

// replay replays the dead letters the form chooses, as kdelay dlq replay
// does (fleet.Choose, fleet.Replay): the first POST shows what would be
// replayed, the second, with confirm=yes, replays it.
func (c *Console) replay(w http.ResponseWriter, r *http.Request) {
	p := replayPage{Reason: r.FormValue("reason"), Target: r.FormValue("target"), All: r.FormValue("all") == "1", Sources: r.Form["source"]}
	f := fleet.Filter{Reason: p.Reason, Target: p.Target}
	if !p.All {
		if len(p.Sources) == 0 {
			c.fail(w, r, http.StatusBadRequest, errors.New("no dead letter selected: tick the ones to replay, or replay all that match"))
			return
		}
		f.Sources = map[string]bool{}
		for _, s := range p.Sources {
			f.Sources[s] = true
		}
	}
	fl := c.cfg.Fleet
	chosen, err := fl.Choose(r.Context(), f, nil)
	if err != nil {
		c.fail(w, r, http.StatusConflict, err)
		return
	}
	if r.FormValue("confirm") != "yes" {
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
