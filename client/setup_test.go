package client_test

import (
	"testing"

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

// fixture is a broker, a kdelay server on topics of the test's own with
// levels 1s and 2s, a target topic, and the ProducerConfig that matches the
// server.
type fixture struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	server  forwarder.Config
	cfg     client.ProducerConfig
	target  string
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
	fx := &fixture{
		t:       t,
		cluster: cluster,
		target:  name + ".target",
		server:  forwarder.Config{Brokers: cluster.Brokers, Topics: topics, Levels: set, Group: name, Partitions: 2},
		cfg:     client.ProducerConfig{Topics: topics, Levels: set},
	}
	cluster.CreateTopic(fx.target, 3, nil)
	fx.start()
	return fx
}

// start runs the kdelay server until the test ends, once its topics exist.
func (fx *fixture) start() { forwardertest.Serve(fx.t, fx.server) }

// headers lists a record's headers as "key=value".
func headers(r *kgo.Record) []string {
	var hs []string
	for _, h := range r.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	return hs
}
