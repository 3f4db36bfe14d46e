package console

import (
	"net/http"
	"time"

	"github.com/kdelay/kdelay/fleet"
)

// levelsPage is the front page: a row per stage, then when what is pending
// in each moves on.
type levelsPage struct {
	Levels  []fleet.LevelStatus
	Columns []string // of the departures table
	Rows    []departuresRow
	Pending int64 // in all stages
}

// departuresRow is a stage's departures, a cell per column.
type departuresRow struct {
	Level   string
	Wait    time.Duration
	Pending int64
	Cells   []cell
	Problem string
}

// cell is one bar: how many records, and its length as a percentage of the
// row's longest bar. Beyond is a column past the stage's delay, where no
// record can be.
type cell struct {
	Records int64
	Percent int
	Beyond  bool
}

func (c *Console) levels(w http.ResponseWriter, r *http.Request) {
	edges := fleet.DefaultEdges()
	st, err := c.cfg.Fleet.Status(r.Context(), c.cfg.NowFunc(), edges)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	p := levelsPage{Levels: st, Columns: columns(edges)}
	for _, s := range st {
		p.Pending += s.Pending
		p.Rows = append(p.Rows, departuresOf(s, edges))
	}
	c.render(w, r, http.StatusOK, "levels.html", "levels", "Levels", p)
}

// columns name the departures table's columns: one per edge, then later
// than the last, then stamped ahead.
func columns(edges []time.Duration) []string {
	cs := []string{"due now"}
	for _, e := range edges[1:] {
		cs = append(cs, "≤ "+shortDuration(e))
	}
	return append(cs, "later", "stamped ahead")
}

// departuresOf places s's bins in the columns of edges: a bin ending at the
// stage's delay goes in the first column whose edge reaches it.
func departuresOf(s fleet.LevelStatus, edges []time.Duration) departuresRow {
	row := departuresRow{Level: s.Level, Wait: s.Wait, Pending: s.Pending, Cells: make([]cell, len(edges)+2)}
	d := s.Departures
	if d == nil || d.Problem != "" {
		if d != nil {
			row.Problem = d.Problem
		}
		return row
	}
	for _, b := range d.Bins {
		row.Cells[column(edges, b.Until)].Records += b.Records
	}
	row.Cells[len(edges)+1].Records = d.Ahead
	last := column(edges, s.Wait)
	var longest int64
	for i := range row.Cells {
		row.Cells[i].Beyond = i > last && i <= len(edges)
		longest = max(longest, row.Cells[i].Records)
	}
	for i := range row.Cells {
		if longest > 0 {
			row.Cells[i].Percent = int(row.Cells[i].Records * 100 / longest)
		}
	}
	return row
}

// column is the index of the first edge that reaches until, or the "later"
// column past the last.
func column(edges []time.Duration, until time.Duration) int {
	for i, e := range edges {
		if until <= e {
			return i
		}
	}
	return len(edges)
}

// shortDuration writes a whole duration short: 1m, 10m, 1h, 6h, 1d, 7d.
func shortDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return itoa(int64(d/(24*time.Hour))) + "d"
	case d >= time.Hour && d%time.Hour == 0:
		return itoa(int64(d/time.Hour)) + "h"
	case d >= time.Minute && d%time.Minute == 0:
		return itoa(int64(d/time.Minute)) + "m"
	}
	return d.String()
}
