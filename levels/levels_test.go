package levels

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	s := Default()
	tests := []struct {
		delay     time.Duration
		hops      string
		remainder time.Duration
	}{
		{0, "", 0},
		{300 * time.Millisecond, "", 300 * time.Millisecond},
		{999 * time.Millisecond, "", 999 * time.Millisecond},
		{time.Second, "1s", 0},
		{1400 * time.Millisecond, "1s", 400 * time.Millisecond},
		{5 * time.Second, "5s", 0},
		{7300 * time.Millisecond, "5s 1s 1s", 300 * time.Millisecond},
		{75 * time.Second, "1m 10s 5s", 0},
		{90 * time.Second, "1m 30s", 0},
		{3*time.Minute + 17*time.Second, "3m 10s 5s 1s 1s", 0},
		{2 * time.Hour, "2h", 0},
		{5 * time.Hour, "2h 2h 1h", 0},
		{5*time.Hour + 59*time.Minute + 59*time.Second + 999*time.Millisecond, "2h 2h 1h 30m 20m 9m 30s 10s 10s 5s 1s 1s 1s 1s", 999 * time.Millisecond},
		{24 * time.Hour, strings.Repeat("2h ", 12)[:35], 0},
		{30 * 24 * time.Hour, strings.TrimSpace(strings.Repeat("2h ", 360)), 0},
	}
	for _, tt := range tests {
		t.Run(tt.delay.String(), func(t *testing.T) {
			hops, rem := s.Plan(tt.delay)
			if got := strings.Join(Set(hops).Names(), " "); got != tt.hops || rem != tt.remainder {
				t.Errorf("Plan(%s) = [%s] + %s held, want [%s] + %s held", tt.delay, got, rem, tt.hops, tt.remainder)
			}
		})
	}
}

// TestPlanProperties checks, over random delays up to 30 days, that a plan
// adds up to the delay, holds less than the smallest level, and that every
// hop fits in the time remaining when it is chosen (so no hop outlasts the
// due time) and is the largest that does.
func TestPlanProperties(t *testing.T) {
	t.Parallel()
	s := Default()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		delay := time.Duration(rng.Int64N(int64(30 * 24 * time.Hour)))
		hops, rem := s.Plan(delay)
		remaining := delay
		for _, h := range hops {
			if h.Delay > remaining {
				t.Fatalf("Plan(%s): hop %s exceeds the %s remaining", delay, h.Name, remaining)
			}
			if i := slices.Index(s, h); i+1 < len(s) && s[i+1].Delay <= remaining {
				t.Fatalf("Plan(%s): hop %s chosen with %s remaining, but %s fits", delay, h.Name, remaining, s[i+1].Name)
			}
			remaining -= h.Delay
		}
		if remaining != rem || rem >= s.Smallest().Delay || rem < 0 {
			t.Fatalf("Plan(%s): remainder %s, hops leave %s; want equal and below %s", delay, rem, remaining, s.Smallest().Name)
		}
	}
}

func TestFor(t *testing.T) {
	t.Parallel()
	s := Default()
	tests := []struct {
		remaining time.Duration
		want      string
	}{
		{-time.Second, ""},
		{0, ""},
		{999 * time.Millisecond, ""},
		{time.Second, "1s"},
		{59*time.Second + 999*time.Millisecond, "30s"},
		{time.Minute, "1m"},
		{100 * time.Hour, "2h"},
	}
	for _, tt := range tests {
		l, ok := s.For(tt.remaining)
		if got := l.Name; got != tt.want || ok != (tt.want != "") {
			t.Errorf("For(%s) = %q, %v; want %q", tt.remaining, got, ok, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	t.Run("keeps names as written, sorted by delay", func(t *testing.T) {
		s, err := Parse([]string{"2h", "90s", " 1s", "500ms"})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(s.Names(), ","); got != "500ms,1s,90s,2h" {
			t.Errorf("names = %s, want 500ms,1s,90s,2h", got)
		}
	})
	t.Run("default is RocketMQ's 18 levels", func(t *testing.T) {
		s := Default()
		if len(s) != 18 || s.Smallest().Delay != time.Second || s.Largest().Delay != 2*time.Hour {
			t.Errorf("Default() = %v, want 18 levels from 1s to 2h", s.Names())
		}
	})
	bad := []struct {
		names []string
		want  string
	}{
		{nil, "no levels"},
		{[]string{"1s", "soon"}, `"soon" is not a Go duration`},
		{[]string{"0s"}, "below 1ms"},
		{[]string{"-1s"}, "below 1ms"},
		{[]string{"1m", "60s"}, "same delay"},
		{[]string{"1µs"}, "below 1ms"},
		{[]string{"1.5µs", "2ms"}, "below 1ms"},
		{[]string{"1H"}, "not a Go duration"},
	}
	for _, tt := range bad {
		_, err := Parse(tt.names)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) error = %v, want one containing %q", tt.names, err, tt.want)
		}
	}
}

// TestDefault checks that Default is RocketMQ's 18 levels, and stays so
// whatever a caller does with what it got: the defaults were once an
// exported slice, and editing it made Default panic.
func TestDefault(t *testing.T) {
	t.Parallel()
	want := []string{"1s", "5s", "10s", "30s", "1m", "2m", "3m", "4m", "5m", "6m", "7m", "8m", "9m", "10m", "20m", "30m", "1h", "2h"}
	if got := Default().Names(); !slices.Equal(got, want) {
		t.Fatalf("Default().Names() = %v, want RocketMQ's %v", got, want)
	}

	t.Run("changing the Set or the names a caller got leaves Default unchanged", func(t *testing.T) {
		t.Parallel()
		s := Default()
		s[0] = Level{Name: "1x", Delay: -1}
		names := Default().Names()
		names[1] = "5x"
		if got := Default().Names(); !slices.Equal(got, want) {
			t.Errorf("after a caller changed its copies, Default().Names() = %v, want %v", got, want)
		}
		if got := Default().Smallest(); got != (Level{Name: "1s", Delay: time.Second}) {
			t.Errorf("after a caller changed its copies, Default().Smallest() = %+v, want 1s", got)
		}
	})

	t.Run("the package has no exported variable a caller could change", func(t *testing.T) {
		t.Parallel()
		files, err := filepath.Glob("*.go")
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range exportedVars(f) {
				t.Errorf("%s exports variable %s: a caller could change it for everyone; make it a function or a constant", file, name)
			}
		}
	})
}

// exportedVars are the exported package-level variables of f.
func exportedVars(f *ast.File) []string {
	var names []string
	for _, decl := range f.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					if name.IsExported() {
						names = append(names, name.Name)
					}
				}
			}
		}
	}
	return names
}
