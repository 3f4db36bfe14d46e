package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/console"
	"github.com/kdelay/kdelay/fleet"
)

// defaultConsoleAddr is where kdelay console listens by default: loopback,
// beside the admin listener's 9464.
const defaultConsoleAddr = "127.0.0.1:9465"

func newConsole() *cobra.Command {
	var addr string
	cmd := &cobra.Command{
		Use:   "console",
		Short: "Serve the web console, read-only: levels and when they move on, dead letters, a message by id",
		Long: `Serve kdelay's web console on --addr, for a fleet of kdelay serve that runs
elsewhere: it reads Kafka alone, as kdelay status does.

  /             the ingress and each level: pending records, oldest due, how late
                the head is, the owners, and when what is pending moves on
  /deadletters  the dead letters, filtered by reason or target
  /find         where the message with a kdelay-id waits, and the command in force

This console is read-only: it replays and commands nothing. kdelay serve's admin
listener serves the same console at /, with the actions (replay, cancel,
reschedule, run-now) when it listens on loopback. Give it the topic-prefix, group
and levels serve runs with (flags, KDELAY_* or --config). docs/CONSOLE.md has more.`,
		Example: "  kdelay console --brokers kafka-1:9092\n  kdelay console --brokers kafka-1:9092 --addr :9465",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			return serveConsole(cmd.Context(), cfg, addr, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&addr, "addr", defaultConsoleAddr, "host:port to serve the console on; loopback by default, so nothing is exposed until you say where")
	config.AddClientFlags(cmd.Flags(), "group", "levels", "max-delay")
	return cmd
}

// serveConsole serves a read-only console on addr until ctx ends. Shutdown
// goes in this order: stop accepting, let the requests in flight finish
// (for up to 5s), then close the Kafka client they use.
func serveConsole(ctx context.Context, cfg config.Config, addr string, stderr io.Writer) error {
	f, err := openFleet(ctx, cfg)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := console.New(console.Config{Fleet: f})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("console: listen on %s: %w; pick a free host:port with --addr", addr, err)
	}
	srv := &http.Server{Handler: c, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stderr, "kdelay console (read-only) on http://%s/ for brokers %v\n", ln.Addr(), cfg.Seeds())
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("console: serve on %s: %w", ln.Addr(), err)
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	return stopped(ctx, g.Wait())
}

// adminConsole is the console serve's admin listener mounts at /, on the
// fleet this serve is part of, and the fleet, to close once the listener
// has stopped. Its actions are on only when the listener is on loopback:
// the console does not authenticate, and loopback is reached by those on
// the machine alone.
func (s server) adminConsole(brokers []string) (*fleet.Fleet, *console.Console, error) {
	fcfg := fleetConfig(s.cfg)
	fcfg.Brokers = brokers
	f, err := fleet.New(fcfg)
	if err != nil {
		return nil, nil, err
	}
	c, err := console.New(console.Config{Fleet: f, Actions: loopback(s.cfg.Admin), Logger: s.log})
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, c, nil
}

// loopback reports whether addr's host is a loopback address or localhost;
// an empty host (":9464") listens on every interface, so it is not.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
