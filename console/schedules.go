package console

import (
	"container/heap"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/schedule"
)

// schedulesPage lists the recurring schedules, as kdelay schedule list
// does, a page at a time: the console runs inside kdelay serve, whose
// memory must not grow with the schedules a page lists.
type schedulesPage struct {
	Topic   string
	InForce []listedSchedule  // a page of them, by id
	Refused []schedule.Listed // records kdelay refuses, with why; on the first page, the first by id
	// Schedules and Refusals count them all.
	Schedules, Refusals int
	After               string // the page lists ids after this one; "" from the first
	More                string // the last id listed, when more follow it
}

// schedulesPerPage is how many schedules, and how many refused records, a
// page lists.
const schedulesPerPage = 500

// listedSchedule is a schedule in force, with what the page says of it now.
type listedSchedule struct {
	schedule.Listed
	Next    time.Time // zero when no occurrence is to come
	Overdue bool
}

// schedules lists a page of the schedules read from the schedules topic to
// its end (fleet.ScanSchedules, the read of kdelay schedule list): those
// whose ids come after the form's after, first by id; the first page lists
// the refused records too.
func (c *Console) schedules(w http.ResponseWriter, r *http.Request) {
	fl := c.cfg.Fleet
	p := schedulesPage{Topic: fl.Config().Topics.Schedules(), After: r.FormValue("after")}
	now := c.cfg.NowFunc()
	var inForce, refused firstIDs
	err := fl.ScanSchedules(r.Context(), func(l schedule.Listed) {
		if l.Err != nil {
			p.Refusals++
			if p.After == "" {
				refused.add(l, "")
			}
			return
		}
		p.Schedules++
		inForce.add(l, p.After)
	})
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	for _, l := range inForce.sorted() {
		p.InForce = append(p.InForce, listedSchedule{Listed: l, Next: l.Next(now), Overdue: l.Overdue(now)})
	}
	p.Refused = refused.sorted()
	if inForce.more && len(p.InForce) > 0 {
		p.More = p.InForce[len(p.InForce)-1].ID
	}
	c.render(w, r, http.StatusOK, "schedules.html", "schedules", "Schedules", p)
}

// firstIDs keeps the schedulesPerPage schedules with the first ids after
// a given one, of those it is given in any order: a heap whose top is the
// last id kept.
type firstIDs struct {
	kept []schedule.Listed
	more bool // some after those kept were left out
}

func (f *firstIDs) add(l schedule.Listed, after string) {
	if after != "" && l.ID <= after {
		return
	}
	if len(f.kept) == schedulesPerPage {
		f.more = true
		if l.ID > f.kept[0].ID {
			return
		}
		heap.Pop((*byLastID)(&f.kept))
	}
	heap.Push((*byLastID)(&f.kept), l)
}

func (f *firstIDs) sorted() []schedule.Listed {
	out := slices.Clone(f.kept)
	slices.SortFunc(out, func(a, b schedule.Listed) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// byLastID is a heap of schedules, the last id on top.
type byLastID []schedule.Listed

func (h byLastID) Len() int           { return len(h) }
func (h byLastID) Less(i, j int) bool { return h[i].ID > h[j].ID }
func (h byLastID) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *byLastID) Push(x any)        { *h = append(*h, x.(schedule.Listed)) }
func (h *byLastID) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
		err := fl.ScanSchedules(r.Context(), func(l schedule.Listed) {
			if l.ID == p.ID {
				p.Listed = &l
			}
		})
		if err != nil {
			c.fail(w, r, http.StatusBadGateway, err)
			return
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
