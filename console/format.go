package console

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/kdelay/kdelay/fleet"
)

// funcs are the templates' helpers: times and durations as a person reads
// them.
func funcs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"when":     func(t time.Time) string { return t.UTC().Format(fleet.TimeFormat) },
		"duration": durationText,
		"late":     lateText,
		"ago":      func(t time.Time) string { return durationText(now().Sub(t)) },
		"fromNow":  func(t time.Time) string { return lateText(now().Sub(t)) },
		"owners":   ownersText,
		"join":     strings.Join,
		"bytes":    fleet.BytesText,
		"count":    countText,
	}
}

// durationText is a duration as a person reads it: 4.2s, 3m12s, 26h5m0s.
func durationText(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + durationText(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// lateText says how late something due is: "due in 3m" while it waits,
// "4.2s late" after.
func lateText(late time.Duration) string {
	if late < 0 {
		return "due in " + durationText(-late)
	}
	return durationText(late) + " late"
}

// ownersText is a stage's owners: "host-a: 0,1; host-b: 2".
func ownersText(os []fleet.Owner) string {
	var parts []string
	for _, o := range os {
		ps := make([]string, len(o.Partitions))
		for i, p := range o.Partitions {
			ps[i] = fmt.Sprint(p)
		}
		if len(ps) == 0 {
			ps = []string{"none"}
		}
		parts = append(parts, o.Name+": "+strings.Join(ps, ","))
	}
	return strings.Join(parts, "; ")
}

// countText is n nouns: "1 dead letter", "2 dead letters".
func countText(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return itoa(int64(n)) + " " + noun + "s"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
