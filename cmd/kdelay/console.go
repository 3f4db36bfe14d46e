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
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay/admin"
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
  /deadletters  the newest dead letters (100, or ?limit=), filtered by reason or target
  /find         where the message with a kdelay-id waits, and the command in force

This console is read-only: it replays and commands nothing. kdelay serve's admin
listener serves the same console at /, with the actions (replay, cancel,
reschedule, run-now) when console-actions is true. Give it the topic-prefix, group
and levels serve runs with (flags, KDELAY_* or --config), and --console-auth-file
to ask for credentials. docs/CONSOLE.md has more.`,
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
	config.AddClientFlags(cmd.Flags(), "group", "levels", "max-delay", "console-auth-file")
	return cmd
}

// serveConsole serves a read-only console on addr until ctx ends. Shutdown
// goes in this order: stop accepting, let the requests in flight finish
// (for up to 5s), then close the Kafka client they use.
func serveConsole(ctx context.Context, cfg config.Config, addr string, stderr io.Writer) error {
	creds, err := readCredentials(cfg)
	if err != nil {
		return usageError{err}
	}
	f, err := openFleet(ctx, cfg)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := console.New(console.Config{Fleet: f, Credentials: creds,
		ActionsHelp: "kdelay console never acts: kdelay serve's admin listener does, with console-actions set to true."})
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
// fleet this serve is part of, with the deliveries metrics counts. It asks
// the brokers through cl, the process's client outside any group, which
// serve closes.
func (s server) adminConsole(brokers []string, metrics *admin.Metrics, cl *kgo.Client) (*console.Console, error) {
	fcfg := fleetConfig(s.cfg)
	fcfg.Brokers, fcfg.Client = brokers, cl
	f, err := fleet.New(fcfg)
	if err != nil {
		return nil, err
	}
	cfg := s.consoleConfig(f)
	cfg.Live = metrics
	return console.New(cfg)
}

// consoleConfig is the admin listener's console on f: read-only unless
// console-actions is true. config.Load has refused actions on a listener
// off loopback without credentials.
func (s server) consoleConfig(f *fleet.Fleet) console.Config {
	return console.Config{Fleet: f, Actions: s.cfg.ConsoleActions, Credentials: s.credentials, Logger: s.log,
		ActionsHelp: "Set console-actions to true (--console-actions, or KDELAY_CONSOLE_ACTIONS=true), and console-auth-file " +
			"when admin is not on loopback, then restart kdelay serve to act from here."}
}

// readCredentials reads the file console-auth-file names, none when it is
// empty.
func readCredentials(cfg config.Config) ([]console.Credential, error) {
	if cfg.ConsoleAuthFile == "" {
		return nil, nil
	}
	cs, err := console.ReadCredentials(cfg.ConsoleAuthFile)
	if err != nil {
		return nil, fmt.Errorf("console-auth-file: %w; fix the file, or the path set in console-auth-file (docs/CONSOLE.md says the format)", err)
	}
	return cs, nil
}
