package fleet

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestGivenClient: a Fleet given a client (Config.Client, as kdelay serve
// gives its console the process's) writes commands through it, and Close
// leaves it open for the others that use it.
func TestGivenClient(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	topics := kdelay.Topics{Prefix: name}
	cluster.CreateTopic(topics.Control(), 1, nil)
	var produced atomic.Int64
	cl := cluster.Client(kgo.WithHooks(produceCounter(func() { produced.Add(1) })))
	f, err := New(Config{Brokers: cluster.Brokers, Topics: topics, Client: cl})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := &kgo.Record{Topic: topics.Control(), Key: []byte("id"), Value: []byte{},
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderCommand, Value: []byte(kdelay.CommandCancel)}}}
	if err := f.WriteCommand(ctx, r); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n := produced.Load(); n != 1 {
		t.Errorf("the given client produced %d records, want the command", n)
	}
	if err := cl.Ping(ctx); err != nil {
		t.Errorf("the given client answers no more after Close: %v", err)
	}
}

// produceCounter calls count for each record a client has produced.
type produceCounter func()

func (c produceCounter) OnProduceRecordUnbuffered(_ *kgo.Record, err error) {
	if err == nil {
		c()
	}
}
