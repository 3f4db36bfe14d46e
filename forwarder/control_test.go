package forwarder

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// onProduce has the fake broker call on for each of topics that a produce
// request names, by name or, since Produce v13, by id, before it answers the
// request as usual. on may hold the request with fake.SleepControl: franz-go
// writes a broker's produce requests on one connection, so a held request
// holds back the ones behind it to the same broker only.
func onProduce(fake *kfake.Cluster, topics []string, on func(topic string)) {
	byID := map[[16]byte]string{}
	for _, topic := range topics {
		byID[fake.TopicInfo(topic).TopicID] = topic
	}
	fake.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if topic, ok := byID[tp.TopicID]; ok {
				on(topic)
				continue
			}
			for _, topic := range topics {
				if tp.Topic == topic {
					on(topic)
				}
			}
		}
		return nil, nil, false
	})
}

// placement is where a topic's partitions lead: its first partitions, on
// node.
type placement struct{ partitions, node int32 }

// placeLeaders moves the leaders of the topics' partitions as places says.
func placeLeaders(t *testing.T, fake *kfake.Cluster, places map[string]placement) {
	t.Helper()
	for topic, place := range places {
		for p := range place.partitions {
			if err := fake.MoveTopicPartition(topic, p, place.node); err != nil {
				t.Fatal(err)
			}
		}
	}
}
