package bench

import (
	"time"

	"github.com/kdelay/kdelay/forwarder"
)

// ServeRun is what the report of a workload run against a kdelay serve
// starts with (sweep, soak, schedules): when it ran, on what and how. Its
// fields are the report's own in JSON.
type ServeRun struct {
	Started    time.Time          `json:"started"`
	Elapsed    time.Duration      `json:"elapsed_ns"`
	Machine    Machine            `json:"machine"`
	Broker     string             `json:"broker"`
	Runner     string             `json:"runner"`
	Delivery   forwarder.Delivery `json:"delivery"`
	ServeFlags []string           `json:"serve_flags,omitempty"`
}

// newServeRun starts the header of a run on broker, begun now.
func newServeRun(broker string, runner Runner, delivery forwarder.Delivery, serveFlags []string) ServeRun {
	return ServeRun{Started: time.Now(), Broker: broker, Runner: runner.String(), Delivery: delivery, ServeFlags: serveFlags}
}

// end records the machine's state at the end and the time the run took.
func (r *ServeRun) end(m Machine) {
	r.Machine = m
	r.Elapsed = time.Since(r.Started)
}
