package forwarder

import "github.com/kdelay/kdelay/stages"

// IngressGroup is the consumer group the ingress router was read with in
// the per-stage layout, which a process now takes the offsets of over once
// (upgrade.go): "<group>.ingress". The rule lives in package stages, with
// the rest of what Kafka shows of a fleet.
func IngressGroup(group string) string { return stages.IngressGroup(group) }

// LevelGroup is the consumer group the level with the given name was read
// with in the per-stage layout: "<group>.level.<name>".
func LevelGroup(group, level string) string { return stages.LevelGroup(group, level) }
