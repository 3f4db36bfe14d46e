package client

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// MemoryStore is a Store in memory, for one consumer process. It remembers
// at most max ids, each for ttl after it was marked, forgetting the oldest
// first when full. Every operation takes constant amortized time. It is safe for
// concurrent use.
//
// It catches the duplicates kdelay makes when it restarts between delivering
// a record and committing that: they come seconds to minutes after the
// original, so a ttl of an hour covers them, and a keyed record's duplicate
// lands on the original's partition, so the same consumer sees it unless a
// rebalance moved that partition (a record without a key may land on any
// partition). It forgets everything when the process exits, so the records
// a restarted consumer reads again are handled again; dedupe those with a
// Store that persists. max bounds memory at roughly 150 bytes plus the id's
// length per id.
type MemoryStore struct {
	// NowFunc returns the current time. Default time.Now. Set it before the
	// first use.
	NowFunc func() time.Time

	max int
	ttl time.Duration

	mu    sync.Mutex
	ids   map[string]*list.Element
	order *list.List // of *marked, oldest mark first
}

type marked struct {
	id string
	at time.Time
}

// NewMemoryStore returns a MemoryStore of at most max ids (100 000 when max
// ≤ 0), each remembered for ttl (1h when ttl ≤ 0).
func NewMemoryStore(max int, ttl time.Duration) *MemoryStore {
	if max <= 0 {
		max = 100_000
	}
	if ttl <= 0 {
		ttl = time.Hour
	}
	return &MemoryStore{max: max, ttl: ttl, ids: map[string]*list.Element{}, order: list.New()}
}

// Seen reports whether id was marked less than ttl ago and not evicted since.
func (s *MemoryStore) Seen(_ context.Context, id string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now() // under mu, so marks are made in time order
	s.expire(now)
	_, ok := s.ids[id]
	return ok, nil
}

// Mark remembers id for ttl from now, forgetting the oldest id if the store
// is full. Marking an id again restarts its ttl.
func (s *MemoryStore) Mark(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now() // under mu, so marks are made in time order
	s.expire(now)
	if e, ok := s.ids[id]; ok {
		e.Value.(*marked).at = now
		s.order.MoveToBack(e)
		return nil
	}
	if s.order.Len() >= s.max {
		s.remove(s.order.Front())
	}
	s.ids[id] = s.order.PushBack(&marked{id: id, at: now})
	return nil
}

// Len is the number of ids remembered, expired ones included until the next
// Seen or Mark drops them.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}

// expire forgets the ids marked ttl or more ago. Marks are kept in the order
// they were made, so those are all at the front; the cost of dropping each is
// paid once, by the call that finds it expired.
func (s *MemoryStore) expire(now time.Time) {
	for e := s.order.Front(); e != nil && now.Sub(e.Value.(*marked).at) >= s.ttl; e = s.order.Front() {
		s.remove(e)
	}
}

func (s *MemoryStore) remove(e *list.Element) {
	delete(s.ids, e.Value.(*marked).id)
	s.order.Remove(e)
}

func (s *MemoryStore) now() time.Time {
	if s.NowFunc != nil {
		return s.NowFunc()
	}
	return time.Now()
}
