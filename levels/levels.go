// Package levels is the routing table: a fixed set of delays, and the rule
// that maps the time remaining until a record is due onto the level it waits
// in next.
//
// Every record in a level waits the same time, so each partition of a level
// topic is ordered by due time and only its head needs watching. Any delay is
// decomposed by hopping to the largest level that fits the time still
// remaining (5h → 2h, 2h, 1h), re-planned from the absolute due time at every
// hop so that lateness at one hop is absorbed by the next instead of adding up.
package levels

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Level is one delay level. Its topic is named after Name.
type Level struct {
	Name  string        // as written in the configuration: "1s", "2h", "1m30s"
	Delay time.Duration // how long each record waits in the level
}

// Set is a list of levels, sorted by delay, with no two alike.
type Set []Level

// Default returns RocketMQ's 18 levels, 1s to 2h: 1s 5s 10s 30s 1m 2m 3m 4m
// 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h. Each call returns a new Set, which the
// caller may change; Default().Names() are the names.
func Default() Set {
	s, err := Parse(defaultNames())
	if err != nil {
		panic(err) // the names are written here and nowhere else; a failure is a bug here
	}
	return s
}

// defaultNames is a function, not a variable, so that no caller can change
// the default levels of everyone else (an exported slice could be edited
// into one that Default could not parse).
func defaultNames() []string {
	return []string{
		"1s", "5s", "10s", "30s", "1m", "2m", "3m", "4m", "5m", "6m",
		"7m", "8m", "9m", "10m", "20m", "30m", "1h", "2h",
	}
}

// A name becomes part of a topic name, so it must use only the characters
// Kafka allows there; Go duration syntax needs no others.
var validName = regexp.MustCompile(`^[0-9a-z.]+$`)

// Parse builds a Set from Go duration strings, keeping each as written for
// its topic name. The result is sorted by delay.
func Parse(names []string) (Set, error) {
	if len(names) == 0 {
		return nil, errors.New("no levels: list at least one delay, e.g. 1s,5s,1m")
	}
	s := make(Set, 0, len(names))
	for _, name := range names {
		name = strings.TrimSpace(name)
		d, err := time.ParseDuration(name)
		if err != nil {
			return nil, fmt.Errorf("level %q is not a Go duration such as 1s, 90s or 2h", name)
		}
		if d < time.Millisecond {
			return nil, fmt.Errorf("level %q is below 1ms; use a delay of at least 1ms", name)
		}
		if !validName.MatchString(name) {
			return nil, fmt.Errorf("level %q cannot be part of a topic name; write it with digits and h, m, s or ms", name)
		}
		s = append(s, Level{Name: name, Delay: d})
	}
	slices.SortFunc(s, func(a, b Level) int { return int(a.Delay - b.Delay) })
	for i := 1; i < len(s); i++ {
		if s[i].Delay == s[i-1].Delay {
			return nil, fmt.Errorf("levels %q and %q are the same delay; list each delay once", s[i-1].Name, s[i].Name)
		}
	}
	return s, nil
}

// Names returns the level names in order.
func (s Set) Names() []string {
	names := make([]string, len(s))
	for i, l := range s {
		names[i] = l.Name
	}
	return names
}

// Smallest is the shortest level: remainders below it are held in memory
// until due instead of waiting in a level.
func (s Set) Smallest() Level { return s[0] }

// Largest is the longest level.
func (s Set) Largest() Level { return s[len(s)-1] }

// For returns the largest level whose delay is at most remaining, or false
// when remaining is below the smallest level. Waiting in the level it returns
// never carries a record past its due time.
func (s Set) For(remaining time.Duration) (Level, bool) {
	i, found := slices.BinarySearchFunc(s, remaining, func(l Level, d time.Duration) int {
		return int(l.Delay - d)
	})
	if found {
		return s[i], true
	}
	if i == 0 {
		return Level{}, false
	}
	return s[i-1], true
}

// Plan returns the hops a record with the given delay takes when every hop
// is on time, and the remainder below the smallest level that is held until
// due. It is what the forwarders do one step at a time; it exists to
// document and test the routing table.
func (s Set) Plan(delay time.Duration) (hops []Level, remainder time.Duration) {
	for {
		l, ok := s.For(delay)
		if !ok {
			return hops, max(delay, 0)
		}
		hops = append(hops, l)
		delay -= l.Delay
	}
}
