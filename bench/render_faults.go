package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteFaultTable writes r as aligned tables for a reader: what arrived in
// each scenario, then lateness over all records and over those due during
// a fault, and last the goals.
func WriteFaultTable(w io.Writer, r *FaultReport) error {
	fmt.Fprintf(w, "kdelay bench faults on %s: %d records/s for %s per scenario, delays 0-%s, grace %s, delivery %s, consumer %s\n",
		r.Broker, r.Rate, r.Duration, r.MaxDelay, r.Grace, r.Delivery, r.Isolation)
	if len(r.ServeFlags) > 0 {
		fmt.Fprintf(w, "kdelay serve %s\n", strings.Join(r.ServeFlags, " "))
	}
	fmt.Fprintf(w, "Machine %d CPUs (%s), %s, steal %s, run took %s\n\n",
		r.Machine.CPUs, r.Machine.Model, r.Machine.Go, percent(r.Machine.Steal), r.Elapsed.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	width := len("SCENARIO")
	for _, s := range r.Scenarios {
		width = max(width, len(s.Scenario))
	}
	fmt.Fprintf(tw, "%s\tSERVE\tSENT\tREFUSED\tDELIVERED\tLOST\tEARLY\tDUP IDS\tEXTRA COPIES\tWRITTEN TWICE\tADDED BY KDELAY\tFAULTS\tBACK AFTER s\t\n", padRight("SCENARIO", width))
	for _, s := range r.Scenarios {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", padRight(s.Scenario, width), s.Instances,
			s.Sent, s.SendFailed, s.Delivered, s.Lost, s.Early, s.DuplicateIDs, s.ExtraCopies, s.WrittenTwice, s.AddedIDs, len(s.Faults), backAfter(s.Faults))
	}
	fmt.Fprintln(tw)
	writeFaultLateness(tw, r, width)
	if err := tw.Flush(); err != nil {
		return err
	}
	writeFloorNote(w, r)
	writeFaultedNodes(w, r)
	for _, s := range r.Scenarios {
		if s.Error != "" {
			fmt.Fprintf(w, "\n%s did not run to its end: %s\n", s.Scenario, s.Error)
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	writeGoals(tw, r.Goals)
	return tw.Flush()
}

// writeFaultLateness writes kdelay's lateness in each scenario beside the
// floor's, over all records and over those due during a fault.
func writeFaultLateness(tw io.Writer, r *FaultReport, width int) {
	fmt.Fprintf(tw, "%s\t%s\tRECORDS\tP50 ms\tP99 ms\tMAX ms\tFLOOR P50\tFLOOR P99\tFLOOR MAX\tMAX−FLOOR\t\n", padRight("LATENESS", width), padRight("DUE", 13))
	for _, s := range r.Scenarios {
		for _, row := range []struct {
			name     string
			g, floor Group
			over     time.Duration
		}{{"any time", s.All, s.Floor, s.MaxOverFloor}, {"during faults", s.DuringFaults, s.FloorDuringFaults, s.DuringFaultsMaxOverFloor}} {
			g, f := row.g, row.floor
			over := "-"
			if g.Delivered > 0 && f.Delivered > 0 {
				over = ms(row.over)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", padRight(s.Scenario, width), padRight(row.name, 13), g.Delivered,
				ms(g.P50), ms(g.P99), ms(g.Max), floorCell(f, f.P50), floorCell(f, f.P99), floorCell(f, f.Max), over)
		}
	}
}

// floorCell is a figure of the floor, "-" when none of its records arrived
// (a report from before the floor was measured, or no fault window).
func floorCell(f Group, d time.Duration) string {
	if f.Delivered == 0 {
		return "-"
	}
	return ms(d)
}

// writeFloorNote says what the floor is, and which scenario's floor lost
// records: a floor that lost some is lower than it should be.
func writeFloorNote(w io.Writer, r *FaultReport) {
	fmt.Fprintln(w, "\nFLOOR: each record's twin, produced at its due time by a timer and a plain producer (acks=all)")
	fmt.Fprintln(w, "to a topic of the scenario's, through the same faults. MAX−FLOOR: what kdelay adds to its max.")
	for _, s := range r.Scenarios {
		if s.Floor.Lost > 0 {
			fmt.Fprintf(w, "%s: the floor lost %d of its %d records (not arrived within the grace)\n", s.Scenario, s.Floor.Lost, s.Floor.Sent)
		}
	}
}

// writeFaultedNodes says which Kafka nodes each fault of a cluster scenario
// stopped, in order, and when each scenario's latest record and the floor's
// were due, after a blank line.
func writeFaultedNodes(w io.Writer, r *FaultReport) {
	var lines []string
	for _, s := range r.Scenarios {
		for _, f := range s.Faults {
			if len(f.Nodes) == 0 {
				continue
			}
			nodes := make([]string, len(f.Nodes))
			for i, id := range f.Nodes {
				nodes[i] = strconv.Itoa(int(id))
			}
			if s.Scenario != ScenarioNodeRoll {
				nodes[0] += " (" + r.NodeRole + ")"
			}
			lines = append(lines, fmt.Sprintf("%s at %.1f s: node %s", s.Scenario, f.At.Seconds(), strings.Join(nodes, ", ")))
		}
		if len(s.Faults) > 0 && s.All.Delivered > 0 && s.Floor.Delivered > 0 {
			lines = append(lines, fmt.Sprintf("%s: the latest record was due at %.1f s, the floor's at %.1f s", s.Scenario, s.MaxDueAt.Seconds(), s.FloorMaxDueAt.Seconds()))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(lines, "\n"))
	}
}

// backAfter is how long the system took to be back after each fault,
// "!" marking one not back within the back timeout.
func backAfter(faults []Fault) string {
	if len(faults) == 0 {
		return "-"
	}
	out := make([]string, len(faults))
	for i, f := range faults {
		out[i] = strconv.FormatFloat(f.Back.Seconds(), 'f', 1, 64)
		if !f.BackOK {
			out[i] += "!"
		}
	}
	return strings.Join(out, " ")
}

// WriteFaultJSON writes r as indented JSON: every figure, as FaultReport's
// fields name them.
func WriteFaultJSON(w io.Writer, r *FaultReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
