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

// readmeMaxLines is how long the front door may grow: read in five minutes,
// as river's (227 lines) and asynq's (317) are; the manual is in docs/.
const readmeMaxLines = 250

// TestREADMEFrontDoor checks what the README promises a new reader: it is
// short, its map of docs/ names every page there, and its tour shows the
// web console with a screenshot.
func TestREADMEFrontDoor(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	t.Run("at most 250 lines", func(t *testing.T) {
		if n := strings.Count(text, "\n"); n > readmeMaxLines {
			t.Errorf("README.md has %d lines, want at most %d: move the detail to its page in docs/", n, readmeMaxLines)
		}
	})
	t.Run("the map names every page of docs/", func(t *testing.T) {
		mapped := map[string]bool{}
		for _, l := range relativeLinks(section(t, text, "## The manual")) {
			mapped[strings.SplitN(l, "#", 2)[0]] = true
		}
		pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pages {
			if name := "docs/" + filepath.Base(p); !mapped[name] {
				t.Errorf("README.md's \"## The manual\" does not link %s", name)
			}
		}
	})
	t.Run("the tour shows the console", func(t *testing.T) {
		tour := section(t, text, "## A one-minute tour")
		if !regexp.MustCompile(`!\[[^\]]*\]\(docs/console/[^)]+\.png\)`).MatchString(tour) || !strings.Contains(tour, "(docs/CONSOLE.md)") {
			t.Errorf("README.md's tour has no screenshot from docs/console/ with a link to docs/CONSOLE.md")
		}
	})
}

// section is the part of a Markdown text from heading to the next "## ".
func section(t *testing.T, text, heading string) string {
	t.Helper()
	_, s, ok := strings.Cut(text, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no section %q", heading)
	}
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	return s
}
