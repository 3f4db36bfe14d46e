package bench

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// fleet is the kdelay serve processes of one fault scenario: children of
// this process, all with one Setup, so that they share the work as one
// consumer group.
type fleet struct {
	cmd   Command
	setup Setup
	procs []*child // running, oldest first

	// Each process has an instance id of its own, as kdelay processes on
	// different hosts do (two with one id fence each other). A process
	// started after one stopped takes its slot, and so its id: a restart
	// under systemd or in a pod keeps its id.
	free  []int
	slots int
}

// start starts one more kdelay serve. It is not ready until its groups are
// stable: the scenario waits for that.
func (f *fleet) start() error {
	slot := f.slots
	if n := len(f.free); n > 0 {
		slot, f.free = f.free[n-1], f.free[:n-1]
	} else {
		f.slots++
	}
	ch, err := f.cmd.start(f.setup, "--instance-id", instanceID(f.setup.Group, slot))
	if err != nil {
		f.free = append(f.free, slot)
		return err
	}
	ch.slot = slot
	f.procs = append(f.procs, ch)
	return nil
}

// instanceID is the instance id of the process in slot of group's fleet.
func instanceID(group string, slot int) string { return fmt.Sprintf("%s-%d", group, slot) }

// kill SIGKILLs the newest process and forgets it.
func (f *fleet) kill() error {
	ch, err := f.pop()
	if err != nil {
		return err
	}
	return ch.kill()
}

// restartOldest stops the oldest process with SIGTERM, waits for it, and
// starts another in its slot, with its instance id, as a rolling deploy
// does.
func (f *fleet) restartOldest() error {
	if len(f.procs) == 0 {
		return errors.New("no kdelay serve left to restart")
	}
	ch := f.procs[0]
	f.procs = f.procs[1:]
	if ch.slot >= 0 {
		f.free = append(f.free, ch.slot)
	}
	if err := stopAll([]*child{ch}); err != nil {
		return err
	}
	return f.start()
}

// term stops the n newest processes with SIGTERM, all at once, and waits
// for them: a clean stop, which leaves the group.
func (f *fleet) term(n int) error {
	var stopping []*child
	for range n {
		ch, err := f.pop()
		if err != nil {
			return err
		}
		stopping = append(stopping, ch)
	}
	return stopAll(stopping)
}

func (f *fleet) pop() (*child, error) {
	if len(f.procs) == 0 {
		return nil, errors.New("no kdelay serve left to stop")
	}
	ch := f.procs[len(f.procs)-1]
	f.procs = f.procs[:len(f.procs)-1]
	if ch.slot >= 0 {
		f.free = append(f.free, ch.slot)
	}
	return ch, nil
}

// err is the first unplanned exit of a process the fleet runs.
func (f *fleet) err() error {
	for _, ch := range f.procs {
		if err := ch.Err(); err != nil {
			return err
		}
	}
	return nil
}

// stop stops every process with SIGTERM, each killed if not gone within
// 30s.
func (f *fleet) stop() error {
	err := stopAll(f.procs)
	f.procs = nil
	return err
}

func stopAll(procs []*child) error {
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, ch := range procs {
		wg.Go(func() {
			if _, err := ch.Stop(); err != nil {
				errs[i] = fmt.Errorf("stop kdelay serve (pid %d): %w", ch.cmd.Process.Pid, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// freeAddr is a loopback address with a port nothing listens on now, for
// an embedded broker that must come back on the same address.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port for the embedded broker: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
