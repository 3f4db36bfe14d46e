package console

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/schedule"
)

// schedulesPage lists the recurring schedules, as kdelay schedule list does.
type schedulesPage struct {
	Topic   string
	InForce []listedSchedule
	Refused []schedule.Listed // records kdelay refuses, with why
}

// listedSchedule is a schedule in force, with what the page says of it now.
type listedSchedule struct {
	schedule.Listed
	Next    time.Time // zero when no occurrence is to come
	Overdue bool
}

// schedules lists the schedules read from the schedules topic to its end
// (fleet.ListSchedules, the read of kdelay schedule list).
func (c *Console) schedules(w http.ResponseWriter, r *http.Request) {
	fl := c.cfg.Fleet
	ls, err := fl.ListSchedules(r.Context())
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	p := schedulesPage{Topic: fl.Config().Topics.Schedules()}
	now := c.cfg.NowFunc()
	for _, l := range ls {
		if l.Err != nil {
			p.Refused = append(p.Refused, l)
			continue
		}
		p.InForce = append(p.InForce, listedSchedule{Listed: l, Next: l.Next(now), Overdue: l.Overdue(now)})
	}
	c.render(w, r, http.StatusOK, "schedules.html", "schedules", "Schedules", p)
}

// scheduleDeletePage asks to confirm a delete, or says it was written.
type scheduleDeletePage struct {
	ID      string
	Listed  *schedule.Listed // what the topic holds under ID; nil when nothing
	Written string           // where the tombstone was written, once it was
}

// deleteSchedule deletes the schedule the form names with the tombstone
// kdelay schedule delete writes (fleet.DeleteSchedule): the first POST shows
// the schedule, the second, with confirm=yes, writes it. A tombstone for an
// id the topic does not hold is written all the same, as the command writes
// it: it deletes nothing, and a schedule written under that id meanwhile
// is deleted, which is what the person asked.
func (c *Console) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	p := scheduleDeletePage{ID: r.FormValue("id")}
	if p.ID == "" {
		c.fail(w, r, http.StatusBadRequest, errors.New("no schedule id: delete a schedule from the schedules page"))
		return
	}
	fl := c.cfg.Fleet
	if r.FormValue("confirm") != "yes" {
		ls, err := fl.ListSchedules(r.Context())
		if err != nil {
			c.fail(w, r, http.StatusBadGateway, err)
			return
		}
		for i := range ls {
			if ls[i].ID == p.ID {
				p.Listed = &ls[i]
			}
		}
		c.render(w, r, http.StatusOK, "schedule-delete.html", "schedules", "Delete schedule "+p.ID+"?", p)
		return
	}
	rec, err := fl.DeleteSchedule(r.Context(), p.ID)
	if err == nil {
		p.Written = kdelay.Source(rec.Topic, rec.Partition, rec.Offset)
	}
	// Written or not, an action someone took: the log says who and what.
	attrs := []any{"id", p.ID, "user", user(r), "remote", r.RemoteAddr}
	if err != nil {
		c.cfg.Logger.Warn("console_schedule_delete_failed", append(attrs, "err", err)...)
		c.fail(w, r, http.StatusBadGateway, fmt.Errorf("schedule %s not deleted: %w", p.ID, err))
		return
	}
	c.cfg.Logger.Info("console_schedule_delete", append(attrs, "written", p.Written)...)
	c.render(w, r, http.StatusOK, "schedule-delete.html", "schedules", "Schedule "+p.ID+" deleted", p)
}
