// Command heartbeat is a heartbeat watchdog on kdelay: simulated devices
// send heartbeats, and a device that falls silent is reported offline
// timeout after its last heartbeat (30 s by default), late only by kdelay's
// lateness. A device that keeps beating is never reported.
//
// With kdelay serve running (go run ./cmd/kdelay serve):
//
//	go run ./examples/heartbeat --brokers 127.0.0.1:9092
//
// See watchdog.go for how: one delayed record per device, rescheduled by
// each heartbeat.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/levels"
)

// config is what the flags set.
type config struct {
	brokers     []string
	topics      kdelay.Topics // kdelay serve's topic prefix
	levels      levels.Set    // kdelay serve's levels
	target      string        // topic offline records are delivered to
	timeout     time.Duration // a device is offline this long after its last heartbeat
	every       time.Duration // between a device's heartbeats
	devices     int           // how many devices beat
	silent      int           // how many of them fall silent
	silentAfter time.Duration // when they do
}

func main() {
	var cfg config
	brokers := flag.String("brokers", cmp.Or(os.Getenv("KDELAY_LISTEN"), "127.0.0.1:9092"), "Kafka brokers, comma-separated: kdelay serve's --listen address")
	flag.StringVar(&cfg.topics.Prefix, "topic-prefix", kdelay.DefaultPrefix, "kdelay serve's --topic-prefix")
	flag.StringVar(&cfg.target, "target", "devices.offline", "topic offline records are delivered to")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "a device is offline this long after its last heartbeat")
	flag.DurationVar(&cfg.every, "every", 5*time.Second, "time between a device's heartbeats: less than --timeout")
	flag.IntVar(&cfg.devices, "devices", 3, "devices to simulate")
	flag.IntVar(&cfg.silent, "silent", 1, "how many of them fall silent; the program ends once they are all reported (0: run until Ctrl-C)")
	flag.DurationVar(&cfg.silentAfter, "silent-after", 10*time.Second, "when they fall silent")
	flag.Parse()
	cfg.brokers = strings.Split(*brokers, ",")
	cfg.levels = levels.Default() // kdelay serve's, unless configured otherwise

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "heartbeat:", err)
		os.Exit(1)
	}
}

// run simulates cfg.devices devices, the last cfg.silent of which fall
// silent after cfg.silentAfter, and reports each device kdelay says is
// offline. It returns once every silent device is reported, or when ctx
// ends. It prints what happens to out.
func run(ctx context.Context, cfg config, out io.Writer) error {
	say := printer(out)
	start := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	p, err := client.NewProducer(ctx, cl, client.ProducerConfig{Topics: cfg.topics, Levels: cfg.levels})
	if err != nil {
		return fmt.Errorf("%w; is kdelay serve running on %s?", err, strings.Join(cfg.brokers, ","))
	}
	// Read what is delivered from now on: an earlier run's offline records
	// are not this run's.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...), kgo.ConsumeTopics(cfg.target),
		kgo.ConsumeResetOffset(kgo.NewOffset().AfterMilli(start.UnixMilli())),
		kgo.AllowAutoTopicCreation()) // to read before the first delivery creates it, as kdelay serve's embedded broker allows
	if err != nil {
		return err
	}
	defer consumer.Close()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	reports := make(chan offline)
	g.Go(func() error {
		return watch(ctx, consumer, func(o offline) {
			select {
			case reports <- o:
			case <-ctx.Done():
			}
		})
	})
	silent := map[string]bool{} // by offline record id, this run's devices: whether each falls silent
	for i := 1; i <= cfg.devices; i++ {
		d := newDevice(p, cfg.target, fmt.Sprintf("device-%d", i), cfg.timeout)
		isSilent := i > cfg.devices-cfg.silent
		silent[d.id] = isSilent
		g.Go(func() error { return simulate(ctx, d, cfg, isSilent, say) })
	}
	g.Go(func() error {
		defer cancel() // every silent device is reported: stop the others
		return report(ctx, reports, silent, cfg, say)
	})
	return g.Wait()
}

// simulate beats until ctx ends or, for a silent device, until
// cfg.silentAfter. A device that is not silent cancels its offline record
// once ctx ends: it did not go offline, it was switched off.
func simulate(ctx context.Context, d *device, cfg config, silent bool, say func(string, ...any)) error {
	var until time.Time
	if silent {
		until = time.Now().Add(cfg.silentAfter)
	}
	var last time.Time
	err := d.beatEvery(ctx, cfg.every, until, func(at time.Time) {
		if last.IsZero() {
			say("%s online: its offline record %s is due at %s", d.name, d.id, clock(at.Add(cfg.timeout)))
		} else {
			say("%s heartbeat: offline at %s unless it beats again", d.name, clock(at.Add(cfg.timeout)))
		}
		last = at
	})
	switch {
	case err != nil:
		return err
	case silent:
		say("%s falls silent: last heartbeat at %s, to be reported at %s", d.name, clock(last), clock(last.Add(cfg.timeout)))
		return nil
	}
	// ctx has ended: the cancel gets a context of its own.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.p.Cancel(cctx, d.id); err != nil {
		return err
	}
	say("%s switched off: its offline record is cancelled", d.name)
	return nil
}

// report prints the offline devices it receives, until every silent one is
// reported (for ever when none is silent) or ctx ends. A device that is
// still beating must never be reported: that is an error.
func report(ctx context.Context, reports <-chan offline, silent map[string]bool, cfg config, say func(string, ...any)) error {
	for left := cfg.silent; left > 0 || cfg.silent == 0; {
		select {
		case <-ctx.Done():
			return nil
		case o := <-reports:
			isSilent, mine := silent[o.id]
			if !mine {
				continue // an earlier run's device
			}
			say("%s OFFLINE: no heartbeat since %s (due %s, arrived late by %s)",
				o.device, clock(o.due.Add(-cfg.timeout)), clock(o.due), o.at.Sub(o.due).Round(time.Millisecond))
			if !isSilent {
				return fmt.Errorf("%s was reported offline while it was beating", o.device)
			}
			left--
		}
	}
	say("every silent device was reported; the %d others kept beating and were never reported", cfg.devices-cfg.silent)
	return nil
}

// printer returns a function printing a line to out, after the time, from
// any goroutine.
func printer(out io.Writer) func(format string, args ...any) {
	var mu sync.Mutex
	return func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, clock(time.Now())+"  "+format+"\n", args...)
	}
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }
