package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"time"
)

// localKafka controls the Apache Kafka broker that scripts/local-kafka
// started on a port: broker-restart stops it and starts it again with its
// data, on the same ports.
type localKafka struct {
	script string
	port   string
}

// newLocalKafka is the local-kafka broker at broker, which must be one the
// script started (it stops only those).
func newLocalKafka(ctx context.Context, script, broker string) (*localKafka, error) {
	_, port, err := net.SplitHostPort(broker)
	if err != nil {
		return nil, fmt.Errorf("broker-restart: %q is not host:port: %w", broker, err)
	}
	k := &localKafka{script: script, port: port}
	if err := k.run(ctx, "status"); err != nil {
		return nil, fmt.Errorf("broker-restart restarts the broker with %s, and there is none it started on port %s (%w): start it with `KAFKA_PORT=%s %s start`, run from the checkout or name the script with --local-kafka, or leave broker-restart out",
			script, port, err, port, script)
	}
	return k, nil
}

// restart stops the broker and starts it again, keeping its data.
func (k *localKafka) restart(ctx context.Context) error {
	if err := k.run(ctx, "stop"); err != nil {
		return err
	}
	return k.run(ctx, "start")
}

// run runs the script with arg, for at most 3 minutes (its own start
// timeout is 2).
func (k *localKafka) run(ctx context.Context, arg string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.script, arg)
	cmd.Env = append(os.Environ(), "KAFKA_PORT="+k.port, "KAFKA_KEEP_DATA=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", k.script, arg, err, strings.TrimSpace(string(out)))
	}
	return nil
}
