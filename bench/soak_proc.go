package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// watched is a process a soak samples.
type watched struct {
	admin string // host:port of its admin listener, whose /metrics is read
	pid   int    // 0 if unknown: its connections are then not counted
}

// cpuMetric is the process's CPU time in /metrics, in seconds.
const cpuMetric = "process_cpu_seconds_total"

// gauges are the series of kdelay serve's /metrics (admin.Metrics:
// client_golang's Go and process collectors) a sample reads, and the field
// each goes to.
func (p *ProcSample) gauges() map[string]*int64 {
	return map[string]*int64{
		"process_resident_memory_bytes": &p.RSS, "go_memstats_heap_inuse_bytes": &p.HeapInuse,
		"go_gc_heap_live_bytes": &p.HeapLive, "go_goroutines": &p.Goroutines, "process_open_fds": &p.OpenFDs,
	}
}

// readProc reads a process's /metrics and counts its TCP connections. What
// it cannot read stays -1, and is among the errors.
func readProc(ctx context.Context, client *http.Client, w watched) (ProcSample, []error) {
	p := unread()
	gauges := p.gauges()
	m, err := readMetrics(ctx, client, w.admin, append(slices.Collect(maps.Keys(gauges)), cpuMetric))
	for name, field := range gauges {
		if v, ok := m[name]; ok {
			*field = int64(v)
		}
	}
	if v, ok := m[cpuMetric]; ok {
		p.CPU = time.Duration(v * float64(time.Second))
	}
	errs := []error{err}
	if w.pid != 0 {
		n, err := TCPConns(w.pid)
		p.TCPConns = int64(n)
		errs = append(errs, err)
	}
	return p, errs
}

// readMetrics reads the named series from the /metrics of the admin
// listener at addr. The scrape allocates in kdelay serve, as any
// Prometheus scraping it does.
func readMetrics(ctx context.Context, client *http.Client, addr string, names []string) (map[string]float64, error) {
	url := "http://" + addr + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w; is the admin listener of kdelay serve there?", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read %s: %s", url, resp.Status)
	}
	return promValues(resp.Body, names...)
}

// promValues reads the named unlabelled series from a Prometheus text
// exposition ("name value [timestamp]" lines). It returns those it found,
// and an error naming those it did not: a kdelay serve too old to expose
// the live heap, say.
func promValues(body io.Reader, names ...string) (map[string]float64, error) {
	text, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for line := range bytes.Lines(text) {
		f := strings.Fields(string(line))
		if len(f) < 2 || !slices.Contains(names, f[0]) {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return out, fmt.Errorf("metric %s: %w", f[0], err)
		}
		out[f[0]] = v
	}
	var missing []string
	for _, n := range names {
		if _, ok := out[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return out, fmt.Errorf("/metrics has no %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// TCPConns counts the established TCP connections of process pid: the
// sockets among its open files (/proc/<pid>/fd links "socket:[inode]")
// whose inode /proc/<pid>/net/tcp or tcp6 lists in state 01, ESTABLISHED.
// Those files list every socket of the process's network namespace, so
// the inode is what makes one the process's own; its listening sockets and
// those closing are left out, so that a leak of connections shows, not
// the listeners. With ports, only those to one of these remote ports
// count: a process's connections to its Kafka brokers.
func TCPConns(pid int, ports ...int) (int, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return -1, err
	}
	sockets := map[string]bool{}
	for _, e := range entries {
		link, err := os.Readlink(filepath.Join(dir, e.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			sockets[strings.TrimSuffix(inode, "]")] = true
		}
	}
	n := 0
	for _, name := range []string{"tcp", "tcp6"} {
		table, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // no tcp6 without IPv6
			return -1, err
		}
		n += countEstablished(table, sockets, ports...)
	}
	return n, nil
}

// tcpEstablished is the state column of /proc/net/tcp for ESTABLISHED.
const tcpEstablished = "01"

// countEstablished counts the lines of a /proc/net/tcp table whose socket
// is in sockets and established, and with ports whose remote port is one of
// them: columns "sl local rem st ... inode", rem "<hex address>:<hex port>",
// the inode tenth.
func countEstablished(table []byte, sockets map[string]bool, ports ...int) int {
	n := 0
	for line := range bytes.Lines(table) {
		f := strings.Fields(string(line))
		if len(f) < 10 || f[3] != tcpEstablished || !sockets[f[9]] {
			continue
		}
		if len(ports) > 0 {
			_, hex, _ := strings.Cut(f[2], ":")
			port, err := strconv.ParseUint(hex, 16, 16)
			if err != nil || !slices.Contains(ports, int(port)) {
				continue
			}
		}
		n++
	}
	return n
}

// dirSize is the bytes of the files below dir; what cannot be read counts 0.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
