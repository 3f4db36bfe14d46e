package kdelay

import (
	"fmt"
	"strings"
)

// Owns reports whether name is one of kdelay's own topics for this prefix:
// the ingress, the control topic, the dead-letter topic, the schedules topic,
// or any level topic, configured or not
// (a level dropped from the configuration may still hold records). A record
// is never delivered to one of them.
func (t Topics) Owns(name string) bool {
	// Parse asks for every record: compare in place rather than build the
	// names.
	rest, ok := strings.CutPrefix(name, t.prefix())
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, ".")
	return ok && (rest == "ingress" || rest == "dlq" || rest == "control" || rest == "schedules" || strings.HasPrefix(rest, "level."))
}

// CheckTarget says why name cannot be a kdelay-target, or returns nil. set is
// false when the header is absent.
func (t Topics) CheckTarget(name string, set bool) error {
	switch {
	case !set || name == "":
		return fmt.Errorf("header %s is missing; set it to the topic to deliver to", HeaderTarget)
	case !ValidTopic(name):
		return fmt.Errorf("header %s %q is not a valid topic name: %s", HeaderTarget, name, TopicNameRule)
	case t.Owns(name):
		return fmt.Errorf("header %s names kdelay's own topic %q; set it to the topic consumers read", HeaderTarget, name)
	}
	return nil
}

// TopicNameRule is Kafka's rule for topic names, in the words every error of
// kdelay that refuses one uses.
const TopicNameRule = "use letters, digits, '.', '_' and '-', at most 249 characters"

// MaxTopicLen is the longest topic name Kafka takes.
const MaxTopicLen = 249

// ValidTopic applies Kafka's rule for topic names (TopicNameRule), so a bad
// name gets the same clear reason from every broker: 1 to MaxTopicLen
// TopicChars, and not "." or "..".
func ValidTopic(name string) bool {
	return name != "" && len(name) <= MaxTopicLen && name != "." && name != ".." && TopicChars(name)
}

// TopicChars reports whether s has only the characters a Kafka topic name
// may have: [a-zA-Z0-9._-].
func TopicChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
