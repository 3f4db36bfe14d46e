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
	return fmt.Sprintf("running kdelay serve (ingress %s, group %s)", r.Topics.Ingress(), r.groupOrDefault())
}

func (r Running) groupOrDefault() string {
	if r.Group == "" {
		return "kdelay"
	}
	return r.Group
}

// Start returns the running forwarder; s is not used.
func (r Running) Start(context.Context, Setup) (Instance, error) {
	return &runningServe{r: r, usageAtStart: r.read()}, nil
}

// runningServe is the kdelay serve a Running names, as the benchmark uses
// it: its CPU time counts from when the benchmark started using it.
type runningServe struct {
	r            Running
	usageAtStart Usage
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

func (in *runningServe) Topics() kdelay.Topics { return in.r.Topics }
func (in *runningServe) Group() string         { return in.r.groupOrDefault() }
func (in *runningServe) Err() error            { return nil }

// Usage counts CPU time from when the benchmark started using it.
func (in *runningServe) Usage() Usage {
	u := in.r.read()
	u.CPU -= in.usageAtStart.CPU
	return u
}

func (in *runningServe) Stop() (Usage, error) { return in.Usage(), nil }
