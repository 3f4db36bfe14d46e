package schedule

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// TestPartitioner: the scheduler's own records in the schedules topic (a
// key that starts with NUL) keep the partition they name; a schedule there,
// and a record of any other topic, go where Kafka's default partitioner
// puts their key, which is where kdelay and `kdelay cancel` look.
func TestPartitioner(t *testing.T) {
	t.Parallel()
	topics := kdelay.Topics{Prefix: "p"}
	const n = 6
	p := Partitioner(topics)
	place := placeKey(topics.Schedules(), n)
	if place([]byte("daily")) == 5 {
		t.Fatal("the schedule's own partition is 5: the schedule's case would show nothing")
	}
	for _, c := range []struct {
		name string
		r    *kgo.Record
		want int32
	}{
		{"progress", progressRecord(topics.Schedules(), 4, "daily", progress{}), 4},
		{"load fence", &kgo.Record{Topic: topics.Schedules(), Partition: 5, Key: fenceKey}, 5},
		{"schedule", &kgo.Record{Topic: topics.Schedules(), Partition: 5, Key: []byte("daily")}, place([]byte("daily"))},
		{"occurrence", &kgo.Record{Topic: topics.Ingress(), Partition: 5, Key: []byte("\x00daily")}, placeKey(topics.Ingress(), n)([]byte("\x00daily"))},
	} {
		tp := p.ForTopic(c.r.Topic)
		if !tp.RequiresConsistency(c.r) {
			t.Errorf("%s: partitioned by no rule of its own", c.name)
		}
		if got := int32(tp.Partition(c.r, n)); got != c.want {
			t.Errorf("%s: partition %d, want %d", c.name, got, c.want)
		}
	}
}

// TestClientChecked: a client given to the scheduler must write its
// records where it reads them, outside any group and transaction.
func TestClientChecked(t *testing.T) {
	t.Parallel()
	topics := kdelay.Topics{Prefix: "c"}
	for _, c := range []struct {
		name string
		opts []kgo.Opt
		want string // in the error; "" for none
	}{
		{"its partitioner", []kgo.Opt{kgo.RecordPartitioner(Partitioner(topics))}, ""},
		{"the default partitioner", nil, "make it with kgo.RecordPartitioner(schedule.Partitioner(topics))"},
		{"another prefix's", []kgo.Opt{kgo.RecordPartitioner(Partitioner(kdelay.Topics{Prefix: "other"}))}, "wrong partitions of c.schedules"},
		{"in a group", []kgo.Opt{kgo.RecordPartitioner(Partitioner(topics)), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t")}, "outside any group and transaction"},
		{"transactional", []kgo.Opt{kgo.RecordPartitioner(Partitioner(topics)), kgo.TransactionalID("x")}, "outside any group and transaction"},
	} {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, c.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(Config{Brokers: []string{"127.0.0.1:1"}, InstanceID: "i", Topics: topics, Client: cl})
		cl.Close()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want none", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), "schedule: Client: ") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one on Client saying %q", c.name, err, c.want)
		}
	}
}
