package main

import (
	"bytes"
	"errors"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// With no broker where they look, send, tail, status and dlq say so within seconds,
// naming the address and the fix, instead of waiting (send 15s, tail
// forever in silence).
func TestNoBroker(t *testing.T) {
	t.Parallel()
	bin, dir := binary(t), t.TempDir()
	refused := closedPort(t)
	silent := silentListener(t)
	commands := map[string][]string{
		"send":       {"send", "--target", "orders", "--delay", "1s", "hello"},
		"tail":       {"tail", "orders"},
		"status":     {"status"},
		"dlq list":   {"dlq", "list"},
		"dlq replay": {"dlq", "replay", "--all"},
	}
	tests := []struct {
		name, addr string
		want       string
	}{
		{"nothing listening", refused, "no Kafka broker at " + refused + ": connection refused: "},
		{"a listener that never answers", silent, silent + " accepted a connection but answered no Kafka request within 3s"},
	}
	for _, tt := range tests {
		for name, args := range commands {
			for _, where := range []struct{ flag, fix string }{
				{"--listen", "start kdelay serve (its embedded broker listens on --listen, here " + tt.addr + "), or point --brokers at your Kafka"},
				{"--brokers", "check --brokers, or start kdelay serve and leave --brokers empty"},
			} {
				t.Run(tt.name+"/"+name+" "+where.flag, func(t *testing.T) {
					t.Parallel()
					args := append(slices.Clone(args), where.flag, tt.addr)
					code, out, took := runWithin(t, 10*time.Second, command(bin, dir, args...))
					if code != 1 || !strings.Contains(out, tt.want) || !strings.Contains(out, where.fix) || took > 6*time.Second {
						t.Errorf("kdelay %s: exit %d after %s, printed:\n%s\nwant exit 1 within 6s, saying %q and %q",
							strings.Join(args, " "), code, took.Round(time.Millisecond), out, tt.want, where.fix)
					}
				})
			}
		}
	}
}

// runWithin runs cmd, killing it after deadline, and returns its exit code,
// what it printed and how long it took.
func runWithin(t *testing.T, deadline time.Duration, cmd *exec.Cmd) (int, string, time.Duration) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer time.AfterFunc(deadline, func() { _ = cmd.Process.Kill() }).Stop()
	err := cmd.Wait()
	took := time.Since(start)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), took
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), took
}

// closedPort is an address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentListener is an address that accepts connections and never answers,
// like a stuck broker or a port of something that is not Kafka.
func silentListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed by the cleanup
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}
