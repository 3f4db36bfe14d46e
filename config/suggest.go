package config

import (
	"cmp"
	"slices"
	"strings"
)

// Closest returns up to three of names within two edits of typed (a swap
// of two letters is one), or that typed begins, closest first: the names
// a "did you mean" offers for a misspelt key, flag or command. It is the
// one rule for all of them.
func Closest(typed string, names []string) []string {
	type candidate struct {
		name   string
		begins bool // typed is an abbreviation of it
		dist   int
	}
	var near []candidate
	for _, name := range names {
		d := editDistance(typed, name)
		begins := len(typed) >= 3 && strings.HasPrefix(name, typed)
		if d > 2 && !begins || slices.ContainsFunc(near, func(c candidate) bool { return c.name == name }) {
			continue
		}
		near = append(near, candidate{name, begins, d})
	}
	// An abbreviation says what was meant: --lis is --listen cut short,
	// not --tls with two letters changed.
	if slices.ContainsFunc(near, func(c candidate) bool { return c.begins }) {
		near = slices.DeleteFunc(near, func(c candidate) bool { return !c.begins })
	}
	slices.SortFunc(near, func(a, b candidate) int { return cmp.Or(cmp.Compare(a.dist, b.dist), strings.Compare(a.name, b.name)) })
	out := make([]string, 0, min(len(near), 3))
	for _, c := range near[:min(len(near), 3)] {
		out = append(out, c.name)
	}
	return out
}

// editDistance is the number of insertions, deletions, substitutions and
// swaps of two adjacent letters that turn a into b (optimal string
// alignment): "brokres" is one swap from "brokers".
func editDistance(a, b string) int {
	// d[i][j] is the distance between a[:i] and b[:j].
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
