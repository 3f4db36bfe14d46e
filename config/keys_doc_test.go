package config

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/kdelay/kdelay"
)

// configDoc is the page that documents every key; its table lives under
// this heading.
const (
	configDoc     = "../docs/CONFIGURATION.md"
	configHeading = "## Keys"
)

// docRow is one row of the key table: the key it names and its default.
type docRow struct {
	key, def, meaning string
}

// TestKeysDocumented checks the key table of docs/CONFIGURATION.md against
// keys(), so that the page is not a second copy that drifts: one row per
// key, in the order of keys() (and of --help), no row for a key that does
// not exist, and each default as keys() has it. A key whose default is
// empty says so, "(empty)", followed by what empty means when it means
// something (retention, instance-id).
func TestKeysDocumented(t *testing.T) {
	t.Parallel()
	rows := docRows(t)
	ks := keys()
	for i, k := range ks {
		if i >= len(rows) {
			t.Fatalf("%s has %d rows; key %s and the %d after it have none: add a row for each", configDoc, len(rows), k.name, len(ks)-i-1)
		}
		r := rows[i]
		if r.key != k.name {
			t.Fatalf("%s: row %d is %q, want %q (one row per key, in the order of config/keys.go)", configDoc, i+1, r.key, k.name)
		}
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			checkDefault(t, k, r)
		})
	}
	if len(rows) > len(ks) {
		t.Errorf("%s has rows for keys config/keys.go does not have: %v", configDoc, rows[len(ks):])
	}
}

func checkDefault(t *testing.T, k key, r docRow) {
	switch {
	case k.def != "" && r.def != "`"+k.def+"`":
		t.Errorf("default of %s: the page says %s, config/keys.go `%s`", k.name, r.def, k.def)
	case k.def == "" && !strings.HasPrefix(r.def, "(empty)"):
		t.Errorf("default of %s: the page says %s; config/keys.go has none: write (empty), then what empty means if it means something", k.name, r.def)
	}
	if k.name == "retention" {
		for _, embedded := range []bool{false, true} {
			if want := "`" + kdelay.DurationText(defaultRetention(embedded)) + "`"; !strings.Contains(r.def, want) {
				t.Errorf("default of retention: the page says %s, want %s in it (embedded broker: %v)", r.def, want, embedded)
			}
		}
	}
	if isSecret(k.name) && !strings.Contains(r.meaning, "no flag") {
		t.Errorf("%s has no flag (a secret); the page's row does not say so: %s", k.name, r.meaning)
	}
}

// keyCell is a table row whose first cell is one key in backticks.
var keyCell = regexp.MustCompile("^\\| `([a-z-]+)` \\| (.*?) \\| (.*) \\|$")

// docRows reads the rows of the key table.
func docRows(t *testing.T) []docRow {
	t.Helper()
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+configHeading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", configDoc, configHeading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []docRow
	for line := range strings.Lines(section) {
		line = strings.TrimSuffix(line, "\n")
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		m := keyCell.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: %q is not | `key` | default | meaning |, one key a row", configDoc, line)
		}
		rows = append(rows, docRow{key: m[1], def: m[2], meaning: m[3]})
	}
	return rows
}
