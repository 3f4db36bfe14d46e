package kafkago

import (
	"context"
	"errors"

	"github.com/segmentio/kafka-go"
)

// missingTopics asks the broker at w's address, through w's transport, which
// of topics do not exist. The metadata request does not create them.
func missingTopics(ctx context.Context, w *kafka.Writer, topics []string) ([]string, error) {
	md, err := (&kafka.Client{Addr: w.Addr, Transport: w.Transport}).Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, err
	}
	found := make(map[string]bool, len(md.Topics))
	for _, t := range md.Topics {
		// Another error, such as LEADER_NOT_AVAILABLE for a topic just
		// created, says the topic exists; Send reports what it means.
		found[t.Name] = !errors.Is(t.Error, kafka.UnknownTopicOrPartition)
	}
	var missing []string
	for _, t := range topics {
		if !found[t] {
			missing = append(missing, t)
		}
	}
	return missing, nil
}
