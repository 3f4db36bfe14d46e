package client

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// missingTopics asks the broker which of topics do not exist. The metadata
// request does not create them, whatever the broker's auto-creation setting.
func missingTopics(ctx context.Context, cl *kgo.Client, topics []string) ([]string, error) {
	// Not closed: closing a kadm.Client closes the kgo.Client it wraps.
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, t := range topics {
		// Another error, such as LEADER_NOT_AVAILABLE for a topic just
		// created, says the topic exists; Send reports what it means.
		if d, ok := details[t]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t)
		}
	}
	return missing, nil
}
