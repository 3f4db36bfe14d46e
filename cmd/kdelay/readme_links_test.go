package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocLinks checks every relative link of README.md and docs/*.md: the
// file or directory it names exists, and a #fragment names a heading of the
// page it points to, as GitHub makes its anchors. A page that moves, or a
// heading renamed, breaks the links to it here rather than for a reader.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchors[path] = headingAnchors(string(b))
		return anchors[path], nil
	}
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, page)
		for _, l := range relativeLinks(string(b)) {
			if problem := checkLink(page, l, anchorsOf); problem != "" {
				t.Errorf("%s: link (%s): %s", name, l, problem)
			}
		}
	}
}

// checkLink says what is wrong with link, a relative link on page, or "".
func checkLink(page, link string, anchorsOf func(string) (map[string]bool, error)) string {
	path, fragment, _ := strings.Cut(link, "#")
	target := page
	if path != "" {
		target = filepath.Clean(filepath.Join(filepath.Dir(page), path))
		if _, err := os.Stat(target); err != nil {
			return "no such file or directory"
		}
	}
	if fragment == "" {
		return ""
	}
	if !strings.HasSuffix(target, ".md") {
		return "a #fragment on a file that is not a Markdown page"
	}
	as, err := anchorsOf(target)
	if err != nil {
		return err.Error()
	}
	if !as[fragment] {
		return fmt.Sprintf("%s has no heading whose anchor is #%s", filepath.Base(target), fragment)
	}
	return ""
}

// link matches a Markdown link or image, its text on one or more lines (a
// bracketed word inside it allowed), and its target.
var link = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)\)`)

// relativeLinks returns the targets of the links outside fenced code blocks
// that are not URLs.
func relativeLinks(text string) []string {
	var out []string
	for _, m := range link.FindAllStringSubmatch(prose(text), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		out = append(out, target)
	}
	return out
}

// prose is text without its fenced code blocks, whose brackets and # lines
// are code.
func prose(text string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(line)
		}
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives the headings of a page:
// the heading's text in lower case, with every character that is not a
// letter, a digit, a space, '-' or '_' dropped, and spaces made '-'; the
// second heading with the same anchor gets "-1", the third "-2".
func headingAnchors(text string) map[string]bool {
	as := map[string]bool{}
	seen := map[string]int{}
	for line := range strings.Lines(prose(text)) {
		line = strings.TrimRight(line, "\n")
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		if hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
			continue
		}
		a := strings.Map(func(r rune) rune {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				return unicode.ToLower(r)
			case r == ' ':
				return '-'
			}
			return -1
		}, strings.TrimSpace(line[hashes:]))
		if n := seen[a]; n > 0 {
			as[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			as[a] = true
		}
		seen[a]++
	}
	return as
}
