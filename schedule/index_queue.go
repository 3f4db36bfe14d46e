package schedule

// The queue is a binary min-heap of slot numbers by the slots' next
// occurrence, each slot's pos its place in it, as container/heap keeps one;
// written out for int32 so that nothing is boxed or allocated per step.
// Slots with the same next come out in the order they were added, so that
// a step is the same however the heap was built.

// head returns the slot number of the soonest next occurrence.
func (x *index) head() (int32, bool) {
	if len(x.queue) == 0 {
		return -1, false
	}
	return x.queue[0], true
}

// fix puts slot i in its place after its next changed: in the queue, moved
// in it, or out of it when next is 0.
func (x *index) fix(i int32) {
	s := x.slot(i)
	switch {
	case s.next == 0 && s.pos >= 0:
		x.unqueue(s)
	case s.next == 0:
	case s.pos < 0:
		s.pos = int32(len(x.queue))
		x.queue = append(x.queue, i)
		x.up(int(s.pos))
	default:
		if !x.down(int(s.pos)) {
			x.up(int(s.pos))
		}
	}
}

// unqueue takes s out of the queue.
func (x *index) unqueue(s *slot) {
	at, last := int(s.pos), len(x.queue)-1
	x.swap(at, last)
	x.queue = x.queue[:last]
	s.pos = -1
	if at < last && !x.down(at) {
		x.up(at)
	}
}

// before reports whether the slot at queue place a comes out before b's.
func (x *index) before(a, b int) bool {
	i, j := x.queue[a], x.queue[b]
	si, sj := x.slot(i), x.slot(j)
	return si.next < sj.next || si.next == sj.next && i < j
}

func (x *index) swap(a, b int) {
	x.queue[a], x.queue[b] = x.queue[b], x.queue[a]
	x.slot(x.queue[a]).pos, x.slot(x.queue[b]).pos = int32(a), int32(b)
}

func (x *index) up(at int) {
	for at > 0 {
		parent := (at - 1) / 2
		if !x.before(at, parent) {
			return
		}
		x.swap(at, parent)
		at = parent
	}
}

// down moves the slot at place at down as far as it goes, and reports
// whether it moved.
func (x *index) down(at int) bool {
	start := at
	for {
		least := at
		for _, c := range [2]int{2*at + 1, 2*at + 2} {
			if c < len(x.queue) && x.before(c, least) {
				least = c
			}
		}
		if least == at {
			return at > start
		}
		x.swap(at, least)
		at = least
	}
}
