package bench

import (
	"context"
	"fmt"
)

// scenario is a fault and what it runs on.
type scenario struct {
	name      string
	instances int // kdelay serve processes at the start
	// ownBroker: on the embedded broker, kdelay serve runs its own, so
	// that stopping the broker is stopping serve.
	ownBroker bool
	// cluster: it faults the nodes of a local-kafka cluster, which must
	// be what --brokers names.
	cluster bool
	// inject injects the fault once and says when the system is back: every
	// group stable with want members, fresh of them new since the fault.
	inject func(ctx context.Context, r *faultRun) (want, fresh int, err error)
	// again says whether the fault can be injected once more.
	again func(r *faultRun) bool
}

func scenarioByName(name string) scenario {
	always := func(*faultRun) bool { return true }
	switch name {
	case ScenarioKillRestart:
		return scenario{name: name, instances: 1, inject: killRestart, again: always}
	case ScenarioKill:
		return scenario{name: name, instances: 3, inject: killOne, again: func(r *faultRun) bool { return len(r.fleet.procs) > 1 }}
	case ScenarioBrokerRestart:
		return scenario{name: name, instances: 1, ownBroker: true, inject: restartBroker, again: always}
	case ScenarioRoll:
		return scenario{name: name, instances: 3, inject: rollServes, again: always}
	case ScenarioNodeKill:
		return scenario{name: name, instances: clusterInstances, cluster: true, inject: killNode, again: always}
	case ScenarioNodeRoll:
		return scenario{name: name, instances: clusterInstances, cluster: true, inject: rollNodes, again: always}
	case ScenarioQuorumLoss:
		return scenario{name: name, instances: clusterInstances, cluster: true, inject: loseQuorum, again: always}
	default:
		return scenario{name: ScenarioScale, instances: 3, inject: scaleDownUp, again: always}
	}
}

// killRestart SIGKILLs a kdelay serve and starts another at once, as a
// service manager would.
func killRestart(_ context.Context, r *faultRun) (int, int, error) {
	n := len(r.fleet.procs)
	if err := r.fleet.kill(); err != nil {
		return 0, 0, err
	}
	return n, 1, r.fleet.start()
}

// killOne SIGKILLs a kdelay serve for good: the others take its partitions
// once the group gives up on it.
func killOne(_ context.Context, r *faultRun) (int, int, error) {
	n := len(r.fleet.procs)
	return n - 1, 0, r.fleet.kill()
}

// restartBroker stops the broker and starts it again with its data: the
// embedded broker is kdelay serve itself; a local-kafka broker is
// restarted by its script, kdelay untouched.
func restartBroker(ctx context.Context, r *faultRun) (int, int, error) {
	if r.kafka == nil {
		return killRestart(ctx, r)
	}
	n := len(r.fleet.procs)
	return n, 0, r.kafka.restart(ctx)
}

// scaleDownUp stops all processes but one with SIGTERM, waits until the
// one left holds every partition, then starts as many again.
func scaleDownUp(ctx context.Context, r *faultRun) (int, int, error) {
	n := len(r.fleet.procs)
	if err := r.fleet.term(n - 1); err != nil {
		return 0, 0, err
	}
	ok, err := r.waitBack(ctx, 1, 0, nil)
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, fmt.Errorf("the one kdelay serve left did not hold every group within %s", r.cfg.BackTimeout)
	}
	for range n - 1 {
		if err := r.fleet.start(); err != nil {
			return 0, 0, err
		}
	}
	return n, n - 1, nil
}

// rollServes restarts every kdelay serve in turn, oldest first: SIGTERM,
// then a new process with the same instance id, and the next once every
// group is stable with all of them again, one of them more new each time.
// A clean stop leaves the groups, so the restarted process joins as a new
// member.
func rollServes(ctx context.Context, r *faultRun) (int, int, error) {
	n := len(r.fleet.procs)
	before, _ := r.c.members(ctx, r.groups) // nil: every member counts as new
	for i := range n {
		if err := r.fleet.restartOldest(); err != nil {
			return 0, 0, err
		}
		if i == n-1 {
			break // the run waits for the last
		}
		ok, err := r.waitBack(ctx, n, i+1, before)
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			return 0, 0, fmt.Errorf("the groups were not stable with %d kdelay serve within %s of restarting number %d", n, r.cfg.BackTimeout, i+1)
		}
	}
	return n, n, nil
}
