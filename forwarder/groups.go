package forwarder

import "github.com/kdelay/kdelay/stages"

// IngressGroup is the consumer group of the ingress router for the group
// setting: "<group>.ingress". Every kdelay process with that setting shares
// it. The rule lives in package stages, with the rest of what Kafka shows of
// a fleet.
func IngressGroup(group string) string { return stages.IngressGroup(group) }

// LevelGroup is the consumer group of the forwarder of the level with the
// given name: "<group>.level.<name>".
func LevelGroup(group, level string) string { return stages.LevelGroup(group, level) }
