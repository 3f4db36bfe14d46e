// Package kdelay holds the wire contract that producers and consumers in any
// language rely on: the names of kdelay's topics and of the headers that route a
// record. Everything here is documented in docs/WIRE.md; a
// change here is a breaking change for users.
package kdelay

// Headers a producer sets on a record written to the ingress topic. Values are
// text so that `kcat -H name=value` is enough.
const (
	// HeaderTarget names the topic the record is delivered to. Required.
	HeaderTarget = "kdelay-target"

	// HeaderDelay is a delay relative to the record's timestamp: integer
	// milliseconds ("90000") or a Go duration ("90s", "1h30m"). Set exactly one
	// of HeaderDelay and HeaderDeliverAt.
	HeaderDelay = "kdelay-delay"

	// HeaderDeliverAt is the absolute due time: unix epoch milliseconds or RFC
	// 3339. kdelay rewrites it to epoch milliseconds once the due time is fixed,
	// and it stays on the delivered record so consumers can measure lateness.
	HeaderDeliverAt = "kdelay-deliver-at"

	// HeaderID is the message id consumers dedupe by. Optional on input: when
	// absent kdelay derives one from the ingress record's
	// topic/partition/offset, so replaying the same record gives the same id.
	HeaderID = "kdelay-id"
)

// Headers kdelay adds to records it puts in the dead-letter topic.
const (
	// HeaderError is a sentence a person can act on, saying why the record
	// could not be delivered.
	HeaderError = "kdelay-error"

	// HeaderSource is topic/partition/offset of the record that failed.
	HeaderSource = "kdelay-source"

	// HeaderTruncated is set only on a dead letter cut to fit the
	// dead-letter topic's max.message.bytes: a comma-separated list of
	// part=original/kept, in bytes, for each part cut. The parts are cut in
	// this order: "value" (its first kept bytes remain), "key" (likewise),
	// "headers" (the record's own headers, names and values; the first ones
	// remain whole). Example: "value=1000100/999646".
	HeaderTruncated = "kdelay-truncated"
)

// DefaultPrefix is the prefix of kdelay's own topics.
const DefaultPrefix = "kdelay"

// Topics names kdelay's own topics for one prefix.
type Topics struct {
	Prefix string // "kdelay" when empty
}

func (t Topics) prefix() string {
	if t.Prefix == "" {
		return DefaultPrefix
	}
	return t.Prefix
}

// Ingress is where any producer writes delayed records: "kdelay.ingress".
func (t Topics) Ingress() string { return t.prefix() + ".ingress" }

// Level is the topic of the level with the given name: "kdelay.level.90s".
func (t Topics) Level(name string) string { return t.prefix() + ".level." + name }

// Control is the compacted topic of commands (see HeaderCommand), keyed by
// message id: "kdelay.control".
func (t Topics) Control() string { return t.prefix() + ".control" }

// DLQ is the dead-letter topic: "kdelay.dlq".
func (t Topics) DLQ() string { return t.prefix() + ".dlq" }

// Schedules is the compacted topic of recurring schedules (see
// HeaderSchedule), keyed by schedule id: "kdelay.schedules".
func (t Topics) Schedules() string { return t.prefix() + ".schedules" }
