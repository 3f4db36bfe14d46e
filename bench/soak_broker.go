package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// soakBrokerPrefix prefixes the topics and groups of the idle forwarder of the
// embedded broker's own kdelay serve.
const soakBrokerPrefix = "kdelay-soak-broker"

// soakBroker is the embedded broker of a soak or a sweep, run as a kdelay
// serve of its own, on a free port with a data directory of its own.
//
// Why a process of its own, not the broker of the kdelay serve under test
// as a deployment without a cluster runs it: the embedded broker keeps
// every record, in its data directory and an index entry per batch in its
// heap, until retention drops them (a day or more away), so its memory
// grows with the load, by far more than a leak of kdelay's
// (docs/BENCHMARKS.md, "Soak", has both), which it would hide. Apart,
// kdelay serve is judged alone, as on a cluster, and the broker is shown
// beside it, not judged. A kdelay serve with its own broker can still be
// soaked whole, with --running.
type soakBroker struct {
	proc    *child
	addr    string  // host:port of its Kafka listener
	watched watched // its admin listener and pid, sampled beside the serve under test
	dataDir string
	level   levels.Set // the one level of its idle forwarder
}

// startSoakBroker starts the embedded broker with run, whose idle forwarder
// has the first level of set. It is not ready until ready says so.
func startSoakBroker(run Command, set levels.Set, partitions int32) (*soakBroker, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	b := &soakBroker{addr: addr, level: set[:1]}
	if b.dataDir, err = os.MkdirTemp("", "kdelay-soak-"); err != nil {
		return nil, fmt.Errorf("make a data directory for the embedded broker: %w", err)
	}
	setup := Setup{
		Topics: kdelay.Topics{Prefix: soakBrokerPrefix}, Group: soakBrokerPrefix, Mode: forwarder.ModeExact,
		Levels: b.level, Partitions: partitions,
	}
	ch, err := run.start(setup, "--listen", addr, "--data-dir", b.dataDir, "--admin", admin)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start the embedded broker: %w", err), os.RemoveAll(b.dataDir))
	}
	b.proc, b.watched = ch, watched{admin: admin, pid: ch.cmd.Process.Pid}
	return b, nil
}

// ready returns once the broker's own forwarder is in its groups on c: the
// broker then takes connections, and creates topics.
func (b *soakBroker) ready(ctx context.Context, c *cluster) error {
	if err := c.waitReady(ctx, b.proc, b.level); err != nil {
		return fmt.Errorf("start the embedded broker: %w", err)
	}
	return nil
}

// stop stops the broker and deletes its data, and returns what its
// process used over its life.
func (b *soakBroker) stop() (Usage, error) {
	u, err := b.proc.Stop()
	return u, errors.Join(err, os.RemoveAll(b.dataDir))
}

// withServeFlags is run with flags added to its kdelay serve command line.
func withServeFlags(run Command, flags []string) Command {
	run.Args = append(slices.Clone(run.args()), flags...)
	return run
}
