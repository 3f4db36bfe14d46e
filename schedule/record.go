package schedule

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// Record builds the record that creates or replaces schedule id, as
// `kdelay schedule create` and the client write it, and checks it with the
// server's own rules (kdelay.ParseSchedule), so that a schedule kdelay would
// refuse is refused here with the same reason. value is every occurrence's
// payload; user are headers every occurrence carries.
//
// Produce it with Kafka's default partitioner (murmur2 of the key, franz-go's
// and Java's): kdelay refuses a schedule found in another partition.
func Record(rules kdelay.Rules, id string, f kdelay.ScheduleFields, value []byte, user []kgo.RecordHeader, now time.Time) (*kgo.Record, kdelay.Schedule, error) {
	// To the millisecond Kafka keeps: the first occurrence is after it.
	now = now.Truncate(time.Millisecond)
	if value == nil {
		value = []byte{} // a null value would delete the schedule
	}
	hs := append([]kgo.RecordHeader(nil), user...)
	for _, h := range f.Headers() {
		hs = append(hs, kgo.RecordHeader(h))
	}
	r := &kgo.Record{Topic: rules.Topics.Schedules(), Key: []byte(id), Value: value, Headers: hs, Timestamp: now}
	s, _, err := kdelay.ParseSchedule(now, r.Key, r.Headers, rules)
	if err != nil {
		return nil, kdelay.Schedule{}, fmt.Errorf("kdelay would refuse this schedule: %w", err)
	}
	return r, s, nil
}

// Tombstone builds the record that deletes schedule id.
func Tombstone(topics kdelay.Topics, id string) (*kgo.Record, error) {
	if id == "" {
		return nil, errors.New("no schedule id; name the schedule to delete")
	}
	return &kgo.Record{Topic: topics.Schedules(), Key: []byte(id), Value: nil}, nil
}
