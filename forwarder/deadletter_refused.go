package forwarder

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// refused reports whether the broker refused r for good, and if so why, in
// words for the DLQ. Anything else (a broker restarting, a leader moving, a
// timeout) is worth trying again.
func refused(r *kgo.Record, err error) (reason string, final bool) {
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return fmt.Sprintf("topic %q does not exist and the broker did not create it: create it (or enable auto.create.topics.enable), then replay this record", r.Topic), true
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		return fmt.Sprintf("the record (%d bytes of key and value) is larger than topic %q accepts: raise its max.message.bytes or send a smaller record", len(r.Key)+len(r.Value), r.Topic), true
	case errors.Is(err, kerr.InvalidTopicException):
		return fmt.Sprintf("%q is not a valid topic name: %s", r.Topic, kdelay.TopicNameRule), true
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Sprintf("kdelay is not allowed to write to topic %q: grant it WRITE on the topic", r.Topic), true
	case errors.Is(err, kgo.ErrRecordTimeout), errors.Is(err, kgo.ErrRecordRetries):
		return "", false
	}
	var ke *kerr.Error
	if errors.As(err, &ke) && !ke.Retriable {
		return fmt.Sprintf("the broker refused the record for topic %q: %v", r.Topic, err), true
	}
	return "", false
}

// expired is the reason of a record the broker kept refusing with err, an
// error worth retrying, for timeout.
func expired(topic string, timeout time.Duration, err error) string {
	return fmt.Sprintf("topic %q did not take the record within delivery-timeout %s; the last error: %v. Fix the cause, then replay this record", topic, timeout, err)
}

// slogLevel is the level of a failed produce: a failed dead letter means a
// record is stuck until the DLQ accepts it, which someone must look at.
func slogLevel(dead bool) slog.Level {
	if dead {
		return slog.LevelError
	}
	return slog.LevelWarn
}
