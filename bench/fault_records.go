package bench

import (
	"encoding/csv"
	"io"
	"strconv"
	"time"
)

// RecordTrace is one record of a fault scenario, kdelay's or the floor's
// twin, in times since writing started. A scenario's max lateness says how
// late its worst record was; these say which records were late, and whether
// they were due before a fault came (held up by it) or while it lasted.
type RecordTrace struct {
	Series  string        // "kdelay" or "floor"
	ID      int           // its number in the scenario's series, in the order it was sent
	Due     time.Duration // when it was due
	Arrived time.Duration // when its first copy arrived; 0 if none did
	Copies  int32
	Refused bool // the broker did not take it into the ingress
}

// recordTraces turns a scenario's trace into RecordTraces.
func recordTraces(series string, started time.Time, ts []traced) []RecordTrace {
	out := make([]RecordTrace, 0, len(ts))
	for id, t := range ts {
		rt := RecordTrace{Series: series, ID: id, Due: t.due.Sub(started), Copies: t.copies, Refused: t.refused}
		if t.copies > 0 {
			rt.Arrived = t.first.Sub(started)
		}
		out = append(out, rt)
	}
	return out
}

// WriteFaultRecords writes every record of every scenario as CSV, a row a
// record with a header row: scenario, series, id, due_s, arrived_s, late_s,
// copies, refused. arrived_s and late_s are empty for a record that never
// arrived.
func WriteFaultRecords(w io.Writer, rep *FaultReport) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"scenario", "series", "id", "due_s", "arrived_s", "late_s", "copies", "refused"}); err != nil {
		return err
	}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) }
	for _, s := range rep.Scenarios {
		for _, r := range s.Records {
			arrived, late := "", ""
			if r.Copies > 0 {
				arrived, late = secs(r.Arrived), secs(r.Arrived-r.Due)
			}
			row := []string{s.Scenario, r.Series, strconv.Itoa(r.ID), secs(r.Due), arrived, late,
				strconv.Itoa(int(r.Copies)), strconv.FormatBool(r.Refused)}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
