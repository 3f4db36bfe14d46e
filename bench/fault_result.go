package bench

import (
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// FaultReport is what Faults measured: plain data, which WriteFaultTable
// and WriteFaultJSON write out. Durations are nanoseconds in JSON.
type FaultReport struct {
	Started    time.Time          `json:"started"`
	Elapsed    time.Duration      `json:"elapsed_ns"`
	Machine    Machine            `json:"machine"`
	Broker     string             `json:"broker"`    // "embedded" or the seed brokers
	Delivery   forwarder.Delivery `json:"delivery"`  // every kdelay serve's
	Isolation  string             `json:"isolation"` // the collector's isolation.level
	ServeFlags []string           `json:"serve_flags,omitempty"`
	Rate       int                `json:"rate"` // records per second
	MaxDelay   time.Duration      `json:"max_delay_ns"`
	Duration   time.Duration      `json:"duration_ns"` // of writing, per scenario
	Grace      time.Duration      `json:"grace_ns"`
	// NodeRole picked the node of node-kill and quorum-loss; empty without
	// cluster scenarios.
	NodeRole string `json:"node_role,omitempty"`

	Scenarios []FaultResult `json:"scenarios"`
	// Goals are every scenario's goals (faultGoals), in its order.
	Goals []Goal `json:"goals"`
}

// FaultResult is what arrived in one scenario. A record counts once in
// Sent, and in Delivered or Lost; DuringFaults counts only those due while
// a fault lasted.
type FaultResult struct {
	Scenario  string `json:"scenario"`
	Broker    string `json:"broker"`    // where it ran
	Instances int    `json:"instances"` // kdelay serve processes at the start

	Sent         int64         `json:"sent"`        // records the broker took into the ingress
	SendFailed   int64         `json:"send_failed"` // records the broker refused: neither sent nor lost
	Delivered    int64         `json:"delivered"`
	Lost         int64         `json:"lost"`  // sent, not arrived within due + grace
	Early        int64         `json:"early"` // first copy arrived before kdelay-deliver-at
	MostEarly    time.Duration `json:"most_early_ns"`
	DuplicateIDs int64         `json:"duplicate_ids"` // ids that arrived more than once
	ExtraCopies  int64         `json:"extra_copies"`  // copies beyond the first, all ids together
	// WrittenTwice counts the ids the ingress itself holds more than once:
	// the driver's producer retried a write the broker had taken but not
	// acknowledged when it died, and the embedded broker, which keeps no
	// producer sequence numbers across a SIGKILL, took it again. kdelay
	// delivers each copy. AddedIDs counts the ids that arrived more often
	// than the ingress holds them: copies kdelay made.
	WrittenTwice int64 `json:"written_twice"`
	AddedIDs     int64 `json:"added_ids"`

	Faults       []Fault `json:"faults"`
	All          Group   `json:"all"`           // lateness of every record
	DuringFaults Group   `json:"during_faults"` // lateness of records due during a fault
	// Floor and FloorDuringFaults are the lateness of the floor's twin of
	// every record, due when it is: a timer that fires at the due time and
	// one produce (acks=all) to a topic of the scenario, through the same
	// faults. MaxOverFloor and DuringFaultsMaxOverFloor are kdelay's max
	// lateness less the floor's: what kdelay adds to Kafka's own recovery.
	Floor                    Group         `json:"floor"`
	FloorDuringFaults        Group         `json:"floor_during_faults"`
	MaxOverFloor             time.Duration `json:"max_over_floor_ns"`
	DuringFaultsMaxOverFloor time.Duration `json:"during_faults_max_over_floor_ns"`
	// MaxDueAt and FloorMaxDueAt are when the latest record was due, after
	// writing started, kdelay's and the floor's: beside a fault's At, they
	// say whether each max was set by a record due before the fault came
	// (held up by it) or by one due while it lasted.
	MaxDueAt      time.Duration `json:"max_due_at_ns"`
	FloorMaxDueAt time.Duration `json:"floor_max_due_at_ns"`

	// Records is every record sent, kdelay's then the floor's, for
	// WriteFaultRecords; not in the JSON report, which stays small.
	Records []RecordTrace `json:"-"`

	Elapsed time.Duration `json:"elapsed_ns"`
	// Error says why the scenario did not run to its end; what it measured
	// until then is above.
	Error string `json:"error,omitempty"`
}

// Fault is one fault injected: when, after writing started, and how long
// the system took to be back (every consumer group stable with the
// kdelay serve processes that should run). Its window, from At to At+Back,
// is what DuringFaults counts.
type Fault struct {
	At     time.Duration `json:"at_ns"`
	Back   time.Duration `json:"back_ns"`
	BackOK bool          `json:"back_ok"` // false: not back within the back timeout, which then ended the window
	// Nodes are the Kafka nodes a cluster scenario stopped or killed, in
	// order.
	Nodes []int32 `json:"nodes,omitempty"`
}

// window is a fault's span in wall-clock time.
type window struct{ from, to time.Time }

func (w window) holds(t time.Time) bool { return !t.Before(w.from) && !t.After(w.to) }
