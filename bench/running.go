package bench

import (
	"context"
	"fmt"

	"github.com/kdelay/kdelay"
)

// Running measures a `kdelay serve` that is already running, on a real
// cluster: the benchmark writes to its ingress and reads what it delivers.
// It cannot switch that forwarder's mode or restart it, so a run with it
// measures one mode and leaves out the throughput comparison.
type Running struct {
	Topics kdelay.Topics // its --topic-prefix
	Group  string        // its --group; default "kdelay"
	PID    int           // its process id, to read CPU and memory from /proc; 0 reads none
}

func (r Running) String() string {
	return fmt.Sprintf("running kdelay serve (ingress %s, group %s)", r.Topics.Ingress(), r.group())
}

func (r Running) group() string {
	if r.Group == "" {
		return "kdelay"
	}
	return r.Group
}

// Start returns the running forwarder; s is not used.
func (r Running) Start(context.Context, Setup) (Instance, error) {
	return &running{r: r, start: r.read()}, nil
}

type running struct {
	r     Running
	start Usage
}

func (r Running) read() Usage {
	if r.PID == 0 {
		return Usage{}
	}
	u, err := procUsage(r.PID)
	if err != nil {
		return Usage{}
	}
	return u
}

func (in *running) Topics() kdelay.Topics { return in.r.Topics }
func (in *running) Group() string         { return in.r.group() }
func (in *running) Err() error            { return nil }

// Usage counts CPU time from when the benchmark started using it.
func (in *running) Usage() Usage {
	u := in.r.read()
	u.CPU -= in.start.CPU
	return u
}

func (in *running) Stop() (Usage, error) { return in.Usage(), nil }
