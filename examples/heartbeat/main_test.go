package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/client"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/forwarder/forwardertest"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// timeout is the tests' --timeout: short, and longer than the largest
// level (2s) so that the offline record waits in a level.
const timeout = 2500 * time.Millisecond

// lateness bounds how late kdelay may report a device in these tests: on
// kfake, on a shared machine.
const lateness = 5 * time.Second

// A device that stops beating is reported offline timeout after its last
// heartbeat, not before, and soon after.
func TestSilentDeviceIsReported(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	reports := fx.watch()
	d := newDevice(fx.producer(), fx.cfg.target, "device-silent", timeout)
	var last time.Time
	for range 3 {
		last = time.Now()
		if err := d.beat(t.Context()); err != nil {
			t.Fatalf("beat: %v", err)
		}
	}
	select {
	case o := <-reports:
		if o.device != d.name || o.id != d.id {
			t.Fatalf("reported %s (%s), want %s (%s)", o.device, o.id, d.name, d.id)
		}
		if early := last.Add(timeout).Sub(o.at); early > 0 {
			t.Errorf("reported %s after its last heartbeat: %s early", o.at.Sub(last), early)
		}
		if o.due.Before(last.Add(timeout)) {
			t.Errorf("its offline record was due at %s, before its last heartbeat %s plus %s", clock(o.due), clock(last), timeout)
		}
	case <-time.After(timeout + lateness):
		t.Fatalf("not reported %s after its last heartbeat", timeout+lateness)
	}
}

// A device that beats more often than timeout is not reported while it
// beats, for several timeouts; once it stops, it is.
func TestBeatingDeviceIsNotReported(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	reports := fx.watch()
	d := newDevice(fx.producer(), fx.cfg.target, "device-beating", timeout)
	ctx, stop := context.WithTimeout(t.Context(), 3*timeout)
	defer stop()
	beats := make(chan time.Time, 1000)
	done := make(chan error, 1)
	go func() {
		done <- d.beatEvery(ctx, 200*time.Millisecond, time.Time{}, func(at time.Time) { beats <- at })
	}()
	var last time.Time
	for beating := true; beating; {
		select {
		case o := <-reports:
			t.Fatalf("%s reported offline at %s while beating (last heartbeat %s)", o.device, clock(o.at), clock(last))
		case last = <-beats:
		case err := <-done:
			if err != nil {
				t.Fatalf("beatEvery: %v", err)
			}
			beating = false
		}
	}
	for len(beats) > 0 {
		last = <-beats
	}
	t.Logf("beat until %s; now silent", clock(last))
	select {
	case o := <-reports:
		if early := last.Add(timeout).Sub(o.at); early > 0 {
			t.Errorf("reported %s after its last heartbeat: %s early", o.at.Sub(last), early)
		}
	case <-time.After(timeout + lateness):
		t.Fatalf("not reported %s after it stopped beating", timeout+lateness)
	}
}

// The command reports the devices that fall silent, never the others, and
// ends once it has; the others cancel their offline record.
func TestRun(t *testing.T) {
	t.Parallel()
	fx := setup(t)
	cfg := fx.cfg
	cfg.timeout, cfg.every, cfg.devices, cfg.silent, cfg.silentAfter = timeout, 200*time.Millisecond, 3, 1, time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v; printed:\n%s", err, &out)
	}
	for _, want := range []string{
		"device-3 falls silent", "device-3 OFFLINE", "device-1 switched off", "device-2 switched off",
		"every silent device was reported; the 2 others kept beating and were never reported",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run did not print %q; printed:\n%s", want, &out)
		}
	}
}

// fixture is a broker, a kdelay server with levels 1s and 2s on topics of
// the test's own, and the config of a run against it.
type fixture struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	cfg     config
}

func setup(t *testing.T) *fixture {
	t.Helper()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	set, err := levels.Parse([]string{"1s", "2s"})
	if err != nil {
		t.Fatal(err)
	}
	topics := kdelay.Topics{Prefix: name}
	fx := &fixture{t: t, cluster: cluster, cfg: config{
		brokers: cluster.Brokers, topics: topics, levels: set, target: name + ".offline",
	}}
	cluster.CreateTopic(fx.cfg.target, 3, nil)
	forwardertest.Serve(t, forwarder.Config{Brokers: cluster.Brokers, Topics: topics, Levels: set, Group: name, Partitions: 2})
	return fx
}

func (fx *fixture) producer() *client.Producer {
	fx.t.Helper()
	p, err := client.NewProducer(fx.t.Context(), fx.cluster.Client(), client.ProducerConfig{Topics: fx.cfg.topics, Levels: fx.cfg.levels})
	if err != nil {
		fx.t.Fatalf("NewProducer: %v", err)
	}
	return p
}

// watch reads the target topic until the test ends and sends what watch
// reports on the channel it returns.
func (fx *fixture) watch() <-chan offline {
	fx.t.Helper()
	cl := fx.cluster.Client(kgo.ConsumeTopics(fx.cfg.target), kgo.FetchMaxWait(50*time.Millisecond))
	reports := make(chan offline, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watch(ctx, cl, func(o offline) { reports <- o }) }()
	fx.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			fx.t.Errorf("watch: %v", err)
		}
	})
	return reports
}
