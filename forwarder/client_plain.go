package forwarder

import (
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// NewPlainClient makes the client a process asks the brokers with outside
// its consumer group: the forwarder's start (topics, levels to drain), the
// control topic's reader, leaving at the end, and what serve runs beside
// the forwarder (Config.Client): the admin listener, the console, the
// scheduler's writes outside the forwarders' transaction. A client each
// held a set of connections each: a process on three brokers held 41 in
// its first minute, from six clients (docs/BENCHMARKS.md, "One client
// outside the group").
//
// It reads as the control reader needs, read committed and with the
// transaction markers (command_control.go), once the reader adds the
// control topic; nothing else may consume with it, and a fetch sent
// through it (kmsg) waits behind the reader's, up to 5 s. opts come last.
func NewPlainClient(cfg Config, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(slices.Concat([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID("kdelay"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// A mark written in an aborted transaction never happened.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers are offsets too: without them the last
		// offset of a partition may never be seen, and loading would not end.
		kgo.KeepControlRecords(),
		kgo.DisableClientMetrics(),
		// Loading a million commands at start must not buffer franz-go's
		// default 50 MiB per fetch: a command is a few dozen bytes, and
		// small fetches load them as fast.
		kgo.FetchMaxBytes(4 << 20),
		kgo.FetchMaxPartitionBytes(1 << 20),
	}, FailoverOpts(), cfg.ClientOpts, opts)...)
}

// checkPlainClient refuses a Config.Client that would not read the control
// topic as the control reader needs: loading would never end, or commands
// written in aborted transactions would count.
func checkPlainClient(cl *kgo.Client) error {
	if cl == nil {
		return nil
	}
	// franz-go reports the isolation level as the protocol's number:
	// 1 is READ_COMMITTED.
	if cl.OptValue(kgo.ConsumerGroup) != "" || cl.OptValue(kgo.FetchIsolationLevel) != int8(1) ||
		cl.OptValue(kgo.KeepControlRecords) != true {
		return errors.New("client: it does not read the control topic as kdelay needs; make it with forwarder.NewPlainClient")
	}
	return nil
}
