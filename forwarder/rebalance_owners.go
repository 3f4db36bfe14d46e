package forwarder

import "sync"

// owners is which partitions of each source topic this process's workers
// own, as their groups assigned them, fetched from or not. A level scans
// every partition it owns (command_scan.go); a router moves a hop ahead only if this
// process owns the partition the hop landed in, since then the level that
// would scan for it shares this process's command table, and the two cannot
// both move it.
type owners struct {
	mu    sync.RWMutex
	parts map[string]map[int32]bool
}

func newOwners() *owners { return &owners{parts: map[string]map[int32]bool{}} }

// set records that this process now owns (own) or no longer owns ids of
// topic.
func (o *owners) set(topic string, ids []int32, own bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ps := o.parts[topic]
	if ps == nil {
		ps = map[int32]bool{}
		o.parts[topic] = ps
	}
	for _, id := range ids {
		if own {
			ps[id] = true
		} else {
			delete(ps, id)
		}
	}
}

// owns reports whether this process owns partition id of topic.
func (o *owners) owns(topic string, id int32) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.parts[topic][id]
}

// of returns the partitions of topic this process owns.
func (o *owners) of(topic string) []int32 {
	o.mu.RLock()
	defer o.mu.RUnlock()
	ids := make([]int32, 0, len(o.parts[topic]))
	for id := range o.parts[topic] {
		ids = append(ids, id)
	}
	return ids
}
