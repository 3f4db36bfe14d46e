package forwarder

// IngressGroup is the consumer group of the ingress router for the group
// setting: "<group>.ingress". Every kdelay process with that setting shares
// it.
func IngressGroup(group string) string { return group + ingressGroup }

// LevelGroup is the consumer group of the forwarder of the level with the
// given name: "<group>.level.<name>".
func LevelGroup(group, level string) string { return group + levelGroup(level) }

// The suffixes a stage keeps, added to Config.Group.
const ingressGroup = ".ingress"

func levelGroup(level string) string { return ".level." + level }
