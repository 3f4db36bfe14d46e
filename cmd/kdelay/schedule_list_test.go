package main

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
)

// TestPrintRows checks that kdelay schedule list's table reads as it did
// through text/tabwriter (columns two spaces apart, aligned to the widest
// cell, ids with letters of several bytes included), trailing spaces
// aside, now that it no longer copies every cell to print it.
func TestPrintRows(t *testing.T) {
	t.Parallel()
	header := "ID\tCRON\tTIME ZONE\tTARGET\tNEXT\tLAST WRITTEN"
	rows := []string{
		"daily\t0 30 2 * * *\tEurope/Berlin\torders\t2026-11-30T01:30:00Z\t-",
		"größe\t@every 5s\tUTC\tt\t2026-11-29T07:00:05Z\t2026-11-29T07:00:00Z",
		"broken\t(refused: no kdelay-target header)\t\t\t\t",
	}
	var got bytes.Buffer
	if err := printRows(&got, header, rows); err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	tw := tabwriter.NewWriter(&want, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	trailing := regexp.MustCompile(`(?m) +$`)
	if w := trailing.ReplaceAllString(want.String(), ""); got.String() != w {
		t.Errorf("printed\n%s\nwant, as text/tabwriter prints it\n%s", got.String(), w)
	}
	if strings.Contains(got.String(), " \n") {
		t.Errorf("a line ends in spaces:\n%q", got.String())
	}
}
