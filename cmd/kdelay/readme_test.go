package main

import (
	"bufio"
	"cmp"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestREADMETour runs the shell commands of the README's set-up and tour as
// a person pasting them in order would, on a free port instead of 9092, and
// checks that they do what the README says: send prints an id and a due
// time, every record reaches the target in tail and in kcat, late and never
// early, except the cancelled one, which never does, the bad record lands
// in the dead-letter topic with the reason the README shows, and serve's
// admin listener serves the web console.
func TestREADMETour(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Skip("kcat is not on PATH; install it (apt-get install kcat) to run the README's tour")
	}
	var steps []step
	for _, heading := range []string{"## Set-up", "## A one-minute tour"} {
		steps = append(steps, shellSteps(t, "README.md", heading)...)
	}
	tr := &tour{t: t, bin: binary(t), dir: t.TempDir(), addr: closedPort(t)}
	for _, s := range steps {
		tr.run(s)
	}
	tr.check(steps)
	tr.checkConsole()
}

// adminListening is serve's log line that says where its admin listener is.
var adminListening = regexp.MustCompile(`admin_listening addr=(\S+)`)

// checkConsole checks what the tour says of the serve it leaves running:
// its admin listener serves the web console at /, read-only. The test's
// serve has its admin listener on a free port, not on 127.0.0.1:9464.
func (tr *tour) checkConsole() {
	t := tr.t
	t.Helper()
	for _, r := range tr.ran {
		if r.running == nil || !strings.Contains(r.line, "kdelay serve") {
			continue
		}
		m := adminListening.FindStringSubmatch(r.out.String())
		if m == nil {
			t.Errorf("%s did not log admin_listening with its address:\n%s", r.line, r.out)
			continue
		}
		code, page := get(t, "http://"+m[1]+"/")
		if code != http.StatusOK || !strings.Contains(page, `<table id="levels">`) || !strings.Contains(page, "read-only") {
			t.Errorf("GET / on the admin listener of %s: %d\n%s\nwant the console's levels page, read-only", r.line, code, page)
		}
	}
}

// readmeListen is the address the README's tour uses; the test puts a free
// one in its place.
const readmeListen = "127.0.0.1:9092"

// step is one command of the README, continuation lines joined, and the
// output lines the README shows for it (the "# ..." lines that follow it).
type step struct {
	line   string
	output []string
}

// shellSteps returns the commands of the ```sh blocks in the section of doc
// (a path from the repository's root, such as README.md or docs/CANCEL.md)
// that starts with heading, up to the next "## " heading.
func shellSteps(t *testing.T, doc, heading string) []step {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", doc, heading)
	}
	section := text[start+len(heading)+2:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var steps []step
	inBlock, cont := false, ""
	sc := bufio.NewScanner(strings.NewReader(section))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "```sh":
			inBlock = true
		case !inBlock:
		case line == "```":
			inBlock = false
		case strings.HasSuffix(line, `\`):
			cont += strings.TrimSuffix(line, `\`)
		case strings.HasPrefix(line, "# ") && cont == "" && len(steps) > 0:
			steps[len(steps)-1].output = append(steps[len(steps)-1].output, strings.TrimPrefix(line, "# "))
		default:
			steps = append(steps, step{line: strings.TrimSpace(cont + line)})
			cont = ""
		}
	}
	if len(steps) == 0 {
		t.Fatalf("%s's section %q has no sh block", doc, heading)
	}
	return steps
}

// tour is the state of a pasted tour: the directory it runs in, what it
// exported, and what it left running.
type tour struct {
	t    *testing.T
	bin  string
	dir  string
	addr string   // in place of readmeListen
	env  []string // exported so far
	ran  []ran
}

// ran is a step and what it printed; running is nil for a command that ran
// to its end, and exited is closed once a running one has.
type ran struct {
	step
	out     *output
	running *exec.Cmd
	exited  chan struct{}
}

// background matches a command run with &, and its comment.
var background = regexp.MustCompile(`\s&\s*(#.*)?$`)

func (tr *tour) run(s step) {
	t := tr.t
	t.Helper()
	line := s.line
	switch {
	case line == "go build -o kdelay ./cmd/kdelay" || strings.HasPrefix(line, "go build -o kdelay ./cmd/kdelay "):
		// The test binary is built already, the same way: put it where
		// the README builds it.
		if err := os.Symlink(tr.bin, filepath.Join(tr.dir, "kdelay")); err != nil {
			t.Fatal(err)
		}
	case strings.HasPrefix(line, "go test "):
		// This test is one of them.
	case strings.HasPrefix(line, "go run ./cmd/kdelay serve"):
		// The set-up's one command: it must start, and stop on Ctrl-C as
		// the README says, before the tour starts its own.
		// On the test's free port, not 9092: the set-up's command runs
		// with the defaults, before the tour exports an address.
		r := tr.start(s, strings.Replace(line, "go run ./cmd/kdelay serve", tr.bin+" serve --listen "+tr.addr, 1))
		select {
		case <-r.out.ready:
		case <-r.exited:
			t.Fatalf("%s exited before it was ready; printed:\n%s", line, r.out)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: not ready after 30s; printed:\n%s", line, r.out)
		}
		_ = syscall.Kill(-r.running.Process.Pid, syscall.SIGINT)
		select {
		case <-r.exited:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s still running 15s after Ctrl-C", line)
		}
		if code := r.running.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("%s exited %d after Ctrl-C, want 0; printed:\n%s", line, code, r.out)
		}
		tr.ran = tr.ran[:len(tr.ran)-1] // done: check looks at what is left running
	case strings.HasPrefix(line, "go "):
		t.Fatalf("README runs %q: teach TestREADMETour what it does", line)
	case strings.HasPrefix(line, "export "):
		name, value, ok := strings.Cut(strings.Fields(strings.TrimPrefix(line, "export "))[0], "=")
		if !ok {
			t.Fatalf("README's %q is not export NAME=VALUE", line)
		}
		tr.env = append(tr.env, name+"="+strings.ReplaceAll(value, readmeListen, tr.addr))
	case strings.Contains(line, "kdelay serve"):
		r := tr.start(s, line)
		select {
		case <-r.out.ready:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: not ready after 30s; printed:\n%s", line, r.out)
		}
	case background.MatchString(line):
		tr.start(s, background.ReplaceAllString(line, ""))
	case strings.Contains(line, "kcat -C"):
		tr.start(s, line) // a consumer the reader stops with Ctrl-C
	default:
		cmd := tr.command(line)
		code, out, _ := runWithin(t, 30*time.Second, cmd)
		if code != 0 {
			t.Fatalf("%s: exit %d, printed:\n%s", line, code, out)
		}
		o := &output{}
		o.buf.WriteString(out)
		tr.ran = append(tr.ran, ran{step: s, out: o})
	}
}

// command runs line in bash in the tour's directory, with what the tour
// exported and none of the test's own KDELAY_ variables.
func (tr *tour) command(line string) *exec.Cmd {
	cmd := command("bash", tr.dir, "-c", line)
	cmd.Env = append(cmd.Env, tr.env...)
	// Its own process group, so that the cleanup stops all it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// start runs line until the test ends, keeping what it prints.
func (tr *tour) start(s step, line string) ran {
	t := tr.t
	t.Helper()
	r := ran{step: s, out: &output{ready: make(chan string, 1)}, running: tr.command(line), exited: make(chan struct{})}
	r.running.Stdout, r.running.Stderr = r.out, r.out
	if err := r.running.Start(); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	go func() { _ = r.running.Wait(); close(r.exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-r.running.Process.Pid, syscall.SIGKILL)
		<-r.exited
		if t.Failed() {
			t.Logf("%s printed:\n%s", line, r.out)
		}
	})
	tr.ran = append(tr.ran, r)
	return r
}

// sentValue is the value of a record the tour writes: the last quoted word
// of kdelay send, or what is echoed into kcat -P.
var sentValue = regexp.MustCompile(`^(?:\./kdelay send .*"([^"]*)"|echo "([^"]*)" \| kcat -P .*)$`)

// ingressPlace is where a record came from: it differs from run to run.
var ingressPlace = regexp.MustCompile(`kdelay\.ingress/\d+/\d+`)

var sendPrints = regexp.MustCompile(`^id=(\S+) due=(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) in=\S+\n$`)

// ingressID is the id kdelay gives a record sent without --id.
var ingressID = regexp.MustCompile(`^kdelay\.ingress/\d+/\d+$`)

// sentID is the --id of a kdelay send, and cancelCommand the id a kdelay
// cancel names.
var (
	sentID        = regexp.MustCompile(`^\./kdelay send .*--id (\S+)`)
	cancelCommand = regexp.MustCompile(`^\./kdelay cancel (\S+)$`)
)

// cancelled returns the values of the records the tour sends and then
// cancels, with the time each was due, which send printed.
func (tr *tour) cancelled() map[string]time.Time {
	t := tr.t
	t.Helper()
	ids := map[string]bool{}
	for _, r := range tr.ran {
		if m := cancelCommand.FindStringSubmatch(r.line); m != nil {
			ids[m[1]] = true
		}
	}
	due := map[string]time.Time{}
	for _, r := range tr.ran {
		id, v := sentID.FindStringSubmatch(r.line), sentValue.FindStringSubmatch(r.line)
		if id == nil || v == nil || !ids[id[1]] {
			continue
		}
		m := sendPrints.FindStringSubmatch(r.out.String())
		if m == nil {
			t.Fatalf("%s printed %q, want id=ID due=TIME in=DURATION", r.line, r.out)
		}
		at, err := time.Parse(time.RFC3339Nano, m[2])
		if err != nil {
			t.Fatalf("%s printed due=%s: %v", r.line, m[2], err)
		}
		due[v[1]] = at
	}
	return due
}

// check waits until what is left running printed what the README says it
// does, and checks what each command printed.
func (tr *tour) check(steps []step) {
	t := tr.t
	t.Helper()
	// Records named by a README output line are dead letters, cancelled
	// ones must never reach the target; the rest must.
	cancelled := tr.cancelled()
	var good []string
	for _, s := range steps {
		m := sentValue.FindStringSubmatch(s.line)
		if m == nil {
			continue
		}
		v := m[1] + m[2]
		if _, ok := cancelled[v]; !ok && !namedInOutput(steps, v) {
			good = append(good, v)
		}
	}
	if len(good) == 0 {
		t.Fatal("the tour sends no record that should be delivered: sentValue no longer reads its commands")
	}
	// kcat writes records to a pipe only when its buffer fills or it
	// stops: wait until the consumers have read what they should, and a
	// cancelled record would have reached them had it not been cancelled
	// (the tour's last records are due later, so this costs nothing), then
	// stop them with Ctrl-C as the README says.
	caughtUp := eventually(45*time.Second, func() bool {
		for _, due := range cancelled {
			if time.Now().Before(due.Add(time.Second)) {
				return false
			}
		}
		for _, r := range tr.ran {
			if exited(r) {
				return true // a consumer failed: nothing more will come
			}
			if isKcatConsumer(r) && consumed(r.out.String()) < cmp.Or(len(r.output), len(good)) ||
				!isKcatConsumer(r) && len(tr.problems(r, good, cancelled)) > 0 {
				return false
			}
		}
		return true
	})
	for _, r := range tr.ran {
		if isKcatConsumer(r) {
			if exited(r) {
				t.Errorf("%s exited before Ctrl-C", r.line)
				continue
			}
			_ = syscall.Kill(-r.running.Process.Pid, syscall.SIGINT)
			select {
			case <-r.exited:
			case <-time.After(10 * time.Second):
				t.Errorf("%s still running 10s after Ctrl-C", r.line)
			}
		}
	}
	for _, r := range tr.ran {
		for _, p := range tr.problems(r, good, cancelled) {
			t.Error(p)
		}
	}
	if !caughtUp && !t.Failed() {
		t.Error("the consumers did not read every record within 45s")
	}
}

// exited reports whether a command left running has exited.
func exited(r ran) bool {
	if r.running == nil {
		return false
	}
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

func isKcatConsumer(r ran) bool { return r.running != nil && strings.HasPrefix(r.line, "kcat -C ") }

// reachedEnd is what kcat prints on standard error, unbuffered, when it has
// read a partition up to offset N.
var reachedEnd = regexp.MustCompile(`(?m)^% Reached end of topic \S+ \[(\d+)\] at offset (\d+)`)

// consumed is how many records kcat says it has read.
func consumed(out string) int {
	last := map[string]int{}
	for _, m := range reachedEnd.FindAllStringSubmatch(out, -1) {
		last[m[1]], _ = strconv.Atoi(m[2])
	}
	n := 0
	for _, offset := range last {
		n += offset
	}
	return n
}

// problems lists how what r printed differs from what the README says.
func (tr *tour) problems(r ran, good []string, cancelled map[string]time.Time) []string {
	out := r.out.String()
	var ps []string
	switch {
	case strings.HasPrefix(r.line, "./kdelay send "):
		want := "kdelay.ingress/P/O"
		if m := sentID.FindStringSubmatch(r.line); m != nil {
			want = m[1]
		}
		if m := sendPrints.FindStringSubmatch(out); m == nil || m[1] != want && !(want == "kdelay.ingress/P/O" && ingressID.MatchString(m[1])) {
			ps = append(ps, fmt.Sprintf("%s printed %q, want id=%s due=TIME in=DURATION", r.line, out, want))
		}
	case strings.Contains(r.line, "kdelay tail "):
		for _, v := range good {
			if !regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3}  \d+/\d+  late \S+ .* value="` + regexp.QuoteMeta(v) + `"  .*kdelay-deliver-at=\d+$`).MatchString(out) {
				ps = append(ps, fmt.Sprintf("%s did not print %q, late, with its kdelay-deliver-at", r.line, v))
			}
		}
		for v := range cancelled {
			if strings.Contains(out, `value="`+v+`"`) {
				ps = append(ps, fmt.Sprintf("%s printed %q, which the tour cancelled", r.line, v))
			}
		}
	case isKcatConsumer(r) && len(r.output) == 0:
		for _, v := range good {
			if !regexp.MustCompile(`(?m)^\S* ` + regexp.QuoteMeta(v) + ` .*kdelay-deliver-at=\d+$`).MatchString(out) {
				ps = append(ps, fmt.Sprintf("%s did not print %q with its kdelay-deliver-at", r.line, v))
			}
		}
		for v := range cancelled {
			if strings.Contains(out, " "+v+" ") {
				ps = append(ps, fmt.Sprintf("%s printed %q, which the tour cancelled", r.line, v))
			}
		}
	}
	for _, want := range r.output {
		if !strings.Contains(ingressPlace.ReplaceAllString(out, "P"), ingressPlace.ReplaceAllString(want, "P")) {
			ps = append(ps, fmt.Sprintf("%s did not print the README's\n%s", r.line, want))
		}
	}
	return ps
}

// namedInOutput reports whether a README output line is about the record
// with value v.
func namedInOutput(steps []step, v string) bool {
	for _, s := range steps {
		for _, o := range s.output {
			if strings.HasPrefix(o, v+" ") {
				return true
			}
		}
	}
	return false
}
