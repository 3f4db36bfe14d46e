package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/kdelay/kdelay/bench"
	"github.com/kdelay/kdelay/forwarder"
)

// TestBenchHelpAgreesWithDoc: `kdelay bench --help` and the "kdelay bench"
// section of docs/COMMANDS.md give the same time for the default run, so that
// a user who reads one is not surprised by the other.
func TestBenchHelpAgreesWithDoc(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/COMMANDS.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## kdelay bench\n")
	if !ok {
		t.Fatal(`docs/COMMANDS.md has no "## kdelay bench" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	minutes := regexp.MustCompile(`about (\d+) minutes`)
	inDoc := minutes.FindStringSubmatch(section)
	inHelp := minutes.FindStringSubmatch(newBench().Long)
	if inDoc == nil || inHelp == nil {
		t.Fatalf("no \"about N minutes\": docs/COMMANDS.md %q, help %q", inDoc, inHelp)
	}
	if inHelp[1] != inDoc[1] {
		t.Errorf("kdelay bench --help says about %s minutes, docs/COMMANDS.md's kdelay bench section about %s", inHelp[1], inDoc[1])
	}
}

// TestBenchRunnerFlags: --running, --in-process and neither choose how the
// forwarder under test runs, and the combinations that cannot work say why.
func TestBenchRunnerFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		flags   benchFlags
		want    string // the Runner's String, or the start of the error
		wantErr bool
	}{
		{"default: a child kdelay serve", benchFlags{}, "child process: kdelay serve", false},
		{"in process", benchFlags{runInProcess: true}, "in-process", false},
		{"running", benchFlags{measureRunning: true, brokers: []string{"kafka:9092"}, prefix: "kdelay", group: "g"},
			"running kdelay serve (ingress kdelay.ingress, group g)", false},
		{"running and in process", benchFlags{measureRunning: true, runInProcess: true, brokers: []string{"kafka:9092"}},
			"--running and --in-process exclude each other", true},
		{"running without brokers", benchFlags{measureRunning: true}, "--running needs --brokers", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := tt.flags.forwarderRunner()
			if tt.wantErr {
				if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
					t.Errorf("error %v, want one starting %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.String(); got != tt.want {
				t.Errorf("runner %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBenchModesOfRunning: a running kdelay serve has one mode, exact unless
// --modes names the other; asking for two is an error that says which flag.
func TestBenchModesOfRunning(t *testing.T) {
	t.Parallel()
	running := benchFlags{measureRunning: true, brokers: []string{"kafka:9092"}, quiet: true}
	tests := []struct {
		name  string
		modes []string
		set   bool
		want  string // modes after bench's defaults, or the error
	}{
		{"no --modes: the bench default", []string{"exact", "poll"}, false, "[exact]"},
		{"--modes poll", []string{"poll"}, true, "[poll]"},
		{"--modes exact,poll", []string{"exact", "poll"}, true, "--running measures the one mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := running
			cfg, err := f.config(workloadFlags{modes: tt.modes, modesSet: tt.set})
			got := fmt.Sprint(cfg.WithDefaults().Modes)
			if err != nil {
				got = err.Error()
			}
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBenchDeliveryFlag: --delivery of kdelay bench, bench faults and bench
// scale reaches what they run, and bench faults then reads the target
// read_committed, as a user of exactly-once delivery must.
func TestBenchDeliveryFlag(t *testing.T) {
	t.Parallel()
	t.Run("every bench command has it, at-least-once by default", func(t *testing.T) {
		t.Parallel()
		cmd := newBench()
		for _, args := range [][]string{{}, {"faults"}, {"scale"}} {
			sub, rest, err := cmd.Find(append(args, "--delivery", "exactly-once"))
			if err != nil {
				t.Fatal(err)
			}
			fl := sub.Flags()
			if err := sub.ParseFlags(rest); err != nil {
				t.Fatalf("kdelay bench %v --delivery exactly-once: %v", args, err)
			}
			if d := fl.Lookup("delivery"); d == nil || d.DefValue != "at-least-once" || d.Value.String() != "exactly-once" {
				t.Errorf("kdelay bench %v: --delivery %+v, want default at-least-once, set to exactly-once", args, d)
			}
		}
	})
	f := benchFlags{delivery: "exactly-once", quiet: true}
	t.Run("bench", func(t *testing.T) {
		t.Parallel()
		cfg, err := f.config(workloadFlags{modes: []string{"exact"}})
		if err != nil || cfg.Delivery != forwarder.ExactlyOnce {
			t.Errorf("delivery %q (%v), want exactly-once", cfg.Delivery, err)
		}
	})
	t.Run("bench faults, read committed", func(t *testing.T) {
		t.Parallel()
		ff := faultFlags{levels: []string{"1s", "5s"}}
		cfg, err := ff.config(&f, false)
		if err != nil {
			t.Fatal(err)
		}
		if cfg = cfg.WithDefaults(); cfg.Delivery != forwarder.ExactlyOnce || !cfg.ReadCommitted {
			t.Errorf("delivery %q, read committed %v; want exactly-once, true", cfg.Delivery, cfg.ReadCommitted)
		}
	})
	t.Run("bench scale", func(t *testing.T) {
		t.Parallel()
		var cfg bench.ScaleConfig
		if err := f.fillScaleConfig(&cfg); err != nil || cfg.Delivery != forwarder.ExactlyOnce {
			t.Errorf("delivery %q (%v), want exactly-once", cfg.Delivery, err)
		}
	})
}
