package bench

import (
	"strconv"
	"time"
)

// trace is what the fault driver needs of each record once a run is over,
// by id: when it was due, when its first copy arrived, how many copies
// arrived, and whether the broker refused it. Which records were due during
// a fault is known only once the system is back from it, so it is worked
// out at the end, from here. The benchmark's million-record runs keep none.
type trace struct {
	due      []time.Time
	first    []time.Time // zero: not arrived
	copies   []int32
	refused  []bool
	nRefused int
}

// traced is one record of a trace.
type traced struct {
	due, first time.Time
	copies     int32
	refused    bool
}

func (t *trace) grow() {
	t.due = append(t.due, time.Time{})
	t.first = append(t.first, time.Time{})
	t.copies = append(t.copies, 0)
	t.refused = append(t.refused, false)
}

func (t *trace) arrival(id int, at time.Time) {
	if t.copies[id] == 0 {
		t.first[id] = at
	}
	t.copies[id]++
}

// scheduled notes when the record with id is due.
func (c *collector) scheduled(id []byte, due time.Time) {
	n, _ := strconv.Atoi(string(id)) // expect made it
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trace.due[n] = due
}

// refused notes that the broker did not take the record with id: it is not
// waited for, and not counted as lost.
func (c *collector) refused(id []byte) {
	n, _ := strconv.Atoi(string(id))
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.trace.refused[n] {
		c.trace.refused[n] = true
		c.trace.nRefused++
	}
}

// settled reports whether every record the broker took has arrived.
func (c *collector) settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.arrived+c.trace.nRefused >= len(c.groups)
}

// traced returns the trace of the ids from..to-1.
func (c *collector) traced(from, to int) []traced {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]traced, 0, to-from)
	for id := from; id < to; id++ {
		t := c.trace
		out = append(out, traced{due: t.due[id], first: t.first[id], copies: t.copies[id], refused: t.refused[id]})
	}
	return out
}

// nextID is the id the next expect will give, so that a run can tell its
// records from those sent before it.
func (c *collector) nextID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.groups)
}
