package bench

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/kdelay/kdelay/schedule"
)

// TestSchedules runs a small schedules workload on an in-process kfake
// broker, with the forwarder and a scheduler in this process: 200
// schedules in force, 5 of them every second for 4s. Each occurrence due
// within the run arrives once, none early, a floor twin beside each judged
// one; the memory is read, as the process's own; the report renders.
// Lateness depends on the machine: not asserted.
func TestSchedules(t *testing.T) {
	t.Parallel()
	brokers, set := setupSweep(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := Schedules(ctx, SchedulesConfig{
		Brokers: brokers, Runner: InProcess{}, Schedules: 200, Timed: 5, For: 4 * time.Second, Warmup: time.Second,
		Settle: 100 * time.Millisecond, Levels: set, Partitions: 2, Grace: 10 * time.Second,
	})
	if err != nil {
		t.Fatalf("Schedules: %v", err)
	}

	t.Run("every occurrence once, none early, the floor beside", func(t *testing.T) {
		// 5 schedules from 1s to 4s in: 3 or 4 judged occurrences each.
		if g := rep.Occurrences; g.Sent < 15 || g.Sent > 20 {
			t.Errorf("%d occurrences judged, want 15 to 20: 5 schedules every second from 1s to 4s", g.Sent)
		}
		for _, g := range []Group{rep.Occurrences, rep.Warm, rep.Floor} {
			if g.Sent == 0 || g.Delivered != g.Sent || g.Duplicates != 0 || g.Early != 0 {
				t.Errorf("%s: %+v, want some, each delivered once, none early", g.Name, g)
			}
		}
		if rep.Floor.Sent != rep.Occurrences.Sent {
			t.Errorf("%d floor records for %d judged occurrences, want one each", rep.Floor.Sent, rep.Occurrences.Sent)
		}
		if !rep.Met() {
			t.Errorf("Met() false for %+v", rep)
		}
	})
	t.Run("the process's memory read, shared", func(t *testing.T) {
		if !rep.Shared || rep.RSSEmpty <= 0 || rep.RSSLoaded <= 0 || rep.PeakRSS < rep.RSSLoaded || rep.Write <= 0 || rep.Load <= 0 {
			t.Errorf("shared %v, RSS empty %d, loaded %d, peak %d, write %s, load %s: want all read, the peak at least the loaded",
				rep.Shared, rep.RSSEmpty, rep.RSSLoaded, rep.PeakRSS, rep.Write, rep.Load)
		}
	})
	t.Run("the scheduler's index read, within its bound", func(t *testing.T) {
		if rep.IndexBytes <= 0 || rep.Partitions != 2 || !rep.IndexMet() {
			t.Errorf("index %d bytes over %d partitions (met %v): want it read, 2 partitions, within the bound", rep.IndexBytes, rep.Partitions, rep.IndexMet())
		}
		over := *rep
		over.IndexBytes = schedule.MaxIndexBytes(over.Schedules, over.Partitions) + 1
		if over.IndexMet() || over.Met() {
			t.Errorf("an index a byte over its bound: IndexMet %v, Met %v; want both false", over.IndexMet(), over.Met())
		}
	})
	t.Run("table and JSON", func(t *testing.T) {
		var table, js strings.Builder
		if err := WriteSchedulesTable(&table, rep); err != nil || !strings.Contains(table.String(), "195 schedules written") ||
			!strings.Contains(table.String(), "occurrences") || !strings.Contains(table.String(), "floor") {
			t.Errorf("table: %v\n%s", err, table.String())
		}
		var back SchedulesReport
		if err := WriteSchedulesJSON(&js, rep); err != nil || json.Unmarshal([]byte(js.String()), &back) != nil || back.Occurrences != rep.Occurrences {
			t.Errorf("JSON: %v, read back %+v, want %+v", err, back.Occurrences, rep.Occurrences)
		}
	})
}
