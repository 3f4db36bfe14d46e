package bench

import (
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// Report is what a run measured: plain data, which Run and Scale fill and
// the renderers (WriteTable, WriteBenchfmt, WriteSVG, WriteJSON) write out.
// Measuring code knows nothing of those formats. Durations are nanoseconds
// in JSON.
type Report struct {
	Started time.Time     `json:"started"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Machine Machine       `json:"machine"`
	Broker  string        `json:"broker"` // "embedded kfake" or the seed brokers
	Runner  string        `json:"runner"` // how the forwarder under test ran
	// Delivery is the forwarder's; with exactly-once the benchmark read
	// its target read_committed.
	Delivery forwarder.Delivery `json:"delivery,omitempty"`

	Modes []ModeResult `json:"modes,omitempty"`
	Copy  *CopyResult  `json:"copy,omitempty"`
	Scale *ScaleResult `json:"scale,omitempty"`
	// Commands is what live commands cost (bench commands).
	Commands *CommandsResult `json:"commands,omitempty"`
	Goals    []Goal          `json:"goals"`
}

// Machine is what the run ran on.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Model      string `json:"cpu_model"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	// Steal is the share of all CPU time the hypervisor gave to others
	// during the run, from /proc/stat; -1 where it cannot be read.
	Steal float64 `json:"steal"`
}

// ModeResult is the lateness of every group of records in one mode, and
// what the forwarder used to deliver them.
type ModeResult struct {
	Mode       forwarder.Mode `json:"mode"`
	Groups     []Group        `json:"groups"`
	SendFailed int64          `json:"send_failed"` // records the benchmark could not write; they count as lost
	Usage      Usage          `json:"usage"`
	Elapsed    time.Duration  `json:"elapsed_ns"`
}

// Group names the records a line of the report is about:
//
//	level=1s     one hop through the level, no remainder
//	delay=7.3s   several hops and a remainder held in memory
//	hops=3       every record of the parts above that takes 3 hops
//	single-hop   level=* together
//	multi-hop    hops=2 and more together
//	rate         the steady rate
//	steady       every record but the burst's: what the goals check
//	burst        records all due in the same millisecond
//	floor        the machine's own lateness: a timer firing at the due
//	             time and one produce straight to the target
const (
	GroupSingleHop = "single-hop"
	GroupMultiHop  = "multi-hop"
	GroupRate      = "rate"
	GroupSteady    = "steady"
	GroupBurst     = "burst"
	GroupFloor     = "floor"
)

// Group is the lateness of one group of records: arrival at a consumer of
// the target topic minus kdelay-deliver-at.
type Group struct {
	Name       string        `json:"name"`
	Sent       int64         `json:"sent"`
	Delivered  int64         `json:"delivered"` // distinct records that arrived
	Lost       int64         `json:"lost"`      // sent but not arrived within the grace period
	Duplicates int64         `json:"duplicates"`
	Early      int64         `json:"early"` // arrived before kdelay-deliver-at
	MostEarly  time.Duration `json:"most_early_ns"`
	P50        time.Duration `json:"p50_ns"`
	P90        time.Duration `json:"p90_ns"`
	P99        time.Duration `json:"p99_ns"`
	P999       time.Duration `json:"p99_9_ns"`
	Max        time.Duration `json:"max_ns"`
	PerSecond  float64       `json:"per_second,omitempty"` // burst: records per second from the due time to the last arrival
}

// Usage is what the forwarder process used.
type Usage struct {
	CPU     time.Duration `json:"cpu_ns"`         // user + system
	RSS     int64         `json:"rss_bytes"`      // resident memory when last read
	PeakRSS int64         `json:"peak_rss_bytes"` // high-water mark of resident memory
	// Shared is true when the forwarder ran in the benchmark's own process,
	// so the figures include the broker and the benchmark.
	Shared bool `json:"shared"`
	// Measured is false when the process could not be read: not Linux, or
	// a forwarder running elsewhere without its pid.
	Measured bool `json:"measured"`
}

// CopyResult compares how fast kdelay forwards records that are all due
// with a raw franz-go consume→produce copy of as many records, on the same
// broker. Each rate is records over the time from the first to the last
// arrival at the target, the median of several runs.
type CopyResult struct {
	Records    int       `json:"records"`
	Copy       float64   `json:"copy_per_second"`   // median of CopyRuns
	Kdelay     float64   `json:"kdelay_per_second"` // median of KdelayRuns
	Ratio      float64   `json:"ratio"`             // Kdelay / Copy
	CopyRuns   []float64 `json:"copy_runs"`
	KdelayRuns []float64 `json:"kdelay_runs"`
}

// ScaleResult is what the forwarder process holds with many records pending,
// what it uses while they wait, and how fast it delivers a large burst.
type ScaleResult struct {
	Pending       int           `json:"pending"`
	RSSEmpty      int64         `json:"rss_empty_bytes"`        // nothing pending, after settling
	RSSPending    int64         `json:"rss_pending_bytes"`      // Pending records waiting, after settling
	PeakPending   int64         `json:"peak_rss_pending_bytes"` // high-water mark of resident memory up to then
	IdleCPU       float64       `json:"idle_cpu_cores"`         // CPU seconds per second while they wait
	IdleFor       time.Duration `json:"idle_for_ns"`
	Burst         int           `json:"burst"`
	BurstWritten  time.Duration `json:"burst_written_ns"` // from the first record sent to the last acknowledged
	BurstLead     time.Duration `json:"burst_lead_ns"`    // from the first record sent to the due time
	BurstDrain    time.Duration `json:"burst_drain_ns"`   // from the due time to the last arrival
	BurstLateness Group         `json:"burst_lateness"`
	Usage         Usage         `json:"usage"`
}

// CommandsResult is what a forwarder holds and how late it delivers with no
// command live and with Commands cancels live, and how long it takes to
// start with them in the control topic.
type CommandsResult struct {
	Commands int   `json:"commands"`
	RSSNone  int64 `json:"rss_none_bytes"` // no command live, after settling
	RSSLive  int64 `json:"rss_live_bytes"` // Commands live, after settling
	// ReadyEmpty and ReadyLoaded are how long a restart took, from start to
	// every group joined, with the control topic empty and with Commands
	// cancels in it: their difference is loading them.
	ReadyEmpty  time.Duration `json:"ready_empty_ns"`
	ReadyLoaded time.Duration `json:"ready_loaded_ns"`
	// None and Live are the steady records' and the floor's lateness, with
	// no command live and with Commands live.
	None  []Group `json:"none"`
	Live  []Group `json:"live"`
	Usage Usage   `json:"usage"`
}

// Load is how much longer a start took with Commands in the control topic.
func (c *CommandsResult) Load() time.Duration { return max(c.ReadyLoaded-c.ReadyEmpty, 0) }

// PerCommand is resident memory per live command, in bytes.
func (c *CommandsResult) PerCommand() float64 {
	if c.Commands == 0 {
		return 0
	}
	return float64(c.RSSLive-c.RSSNone) / float64(c.Commands)
}

// Goal is one of kdelay's targets (lateness, no loss, throughput, memory,
// idle CPU) and what the run got.
type Goal struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// Group returns the named group of the mode's results.
func (m ModeResult) Group(name string) (Group, bool) {
	for _, g := range m.Groups {
		if g.Name == name {
			return g, true
		}
	}
	return Group{}, false
}

// Mode returns the results of one mode.
func (r *Report) Mode(mode forwarder.Mode) (ModeResult, bool) {
	for _, m := range r.Modes {
		if m.Mode == mode {
			return m, true
		}
	}
	return ModeResult{}, false
}
