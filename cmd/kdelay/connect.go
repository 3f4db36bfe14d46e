package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/fleet"
)

// answerTimeout bounds how long send and tail wait for a broker to answer
// its first request. A running broker answers in milliseconds; without this
// bound a produce waits out its 15s, a consume waits forever in silence,
// and an address that accepts but never answers takes 40s to time out.
const answerTimeout = 3 * time.Second

// connect makes the Kafka client of send and tail once a broker answers at
// cfg's address; if none does within answerTimeout, the error says which
// address it tried and how to fix it.
func connect(ctx context.Context, cfg config.Config, opts ...kgo.Opt) (*kgo.Client, error) {
	if err := probe(ctx, cfg); err != nil {
		return nil, err
	}
	return newClient(cfg, opts...)
}

// openFleet is what status, dlq and the commands read and write the fleet
// with, once a broker answers at cfg's address.
func openFleet(ctx context.Context, cfg config.Config) (*fleet.Fleet, error) {
	if err := probe(ctx, cfg); err != nil {
		return nil, err
	}
	return fleet.New(fleetConfig(cfg))
}

// fleetConfig is the fleet cfg's serve runs.
func fleetConfig(cfg config.Config) fleet.Config {
	return fleet.Config{Brokers: cfg.Seeds(), ClientOpts: cfg.ClientOpts(), Topics: kdelay.Topics{Prefix: cfg.TopicPrefix},
		Group: cfg.Group, Levels: cfg.Levels, MaxDelay: cfg.MaxDelay}
}

// newClient makes a Kafka client for cfg's brokers, with its TLS and SASL
// settings, once connect has checked that a broker answers.
func newClient(cfg config.Config, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(slices.Concat([]kgo.Opt{kgo.SeedBrokers(cfg.Seeds()...)}, cfg.ClientOpts(), opts)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for %s: %w", strings.Join(cfg.Seeds(), ","), err)
	}
	return cl, nil
}

// probe asks for the cluster's brokers, with a client of its own: a
// request's context does not bound the wait for its response, the client's
// RequestTimeoutOverhead (10s by default) does, and that is too long for
// the clients that then do the work.
func probe(ctx context.Context, cfg config.Config) error {
	cl, err := kgo.NewClient(slices.Concat([]kgo.Opt{kgo.SeedBrokers(cfg.Seeds()...)}, cfg.ClientOpts(),
		[]kgo.Opt{kgo.DialTimeout(answerTimeout), kgo.RequestTimeoutOverhead(answerTimeout)})...)
	if err != nil {
		return fmt.Errorf("kafka client for %s: %w", strings.Join(cfg.Seeds(), ","), err)
	}
	defer cl.Close()
	pingCtx, cancel := context.WithTimeout(ctx, answerTimeout)
	defer cancel()
	err = cl.Ping(pingCtx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err() // interrupted: not a problem with the broker
	}
	if why := refused(err); why != nil {
		return why
	}
	return unreachable(cfg, err, accepts(cfg.Seeds()))
}

// unreachable says why no broker answered and what to do about it.
func unreachable(cfg config.Config, err error, accepted bool) error {
	addr := strings.Join(cfg.Seeds(), ",")
	fix := "check --brokers, or start kdelay serve and leave --brokers empty"
	if cfg.Embedded() {
		fix = fmt.Sprintf("start kdelay serve (its embedded broker listens on --listen, here %s), or point --brokers at your Kafka", addr)
	}
	var timeout net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no Kafka broker at %s: connection refused: %s", addr, fix)
	case accepted && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &timeout) && timeout.Timeout()):
		return fmt.Errorf("%s accepted a connection but answered no Kafka request within %s: it is not a Kafka broker, or one that is stuck; %s", addr, answerTimeout, fix)
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &timeout) && timeout.Timeout():
		return fmt.Errorf("no Kafka broker at %s answered within %s (%v): %s", addr, answerTimeout, err, fix)
	}
	if accepted && cfg.TLS == nil {
		fix += "; if the broker's listener is TLS, set tls to true"
	}
	return fmt.Errorf("no Kafka broker at %s: %w: %s", addr, err, fix)
}

// accepts reports whether any of addrs accepts a TCP connection, which
// tells a broker that is not there from an address that accepts
// connections but is not a Kafka broker. It dials again rather than ask the
// client: a request returns when its context ends, before the client's
// dial has reported how it went.
func accepts(addrs []string) bool {
	for _, addr := range addrs {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			addr = net.JoinHostPort(addr, "9092") // as franz-go does
		}
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return true
		}
	}
	return false
}
