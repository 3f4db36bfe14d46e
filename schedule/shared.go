package schedule

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kdelay/kdelay/forwarder"
)

// With Config.AsReader the scheduler reads the schedules topic as a
// forwarder.Reader: on the forwarders' client, in their group, as kdelay
// serve runs it. A client and a group of its own cost a process a group
// member, a heartbeat and up to three connections a broker, and a
// deployment a second group (docs/design/one-client.md, step 8b). What
// changes from a client of its own:
//
//   - The forwarders' poll loop hands it its records (Take) and their
//     callbacks its partitions; its loop waits on wakeCh, not in a poll.
//   - Its rule, that a partition changes owner only while nothing decided
//     from it is being written, is a lock (stepMu) that a step holds while
//     it decides and writes, and that Revoked and Lost wait for; before,
//     BlockRebalanceOnPoll kept the group's callbacks to its own polls.
//   - At-least-once it writes with its client outside the group
//     (Config.Client, or one Run makes), exactly-once into the forwarders'
//     transaction (ReaderClient.Produce), with the offset commit that
//     carries the group's generation, as its own transaction did. Its
//     read-backs go on the forwarders' client too (ReaderClient.Request).
//   - It leaves no group: the forwarders leave theirs.
//   - Before its first step it waits until "<group>.schedules" has no
//     members: a process of an earlier version, whose scheduler is in that
//     group, owns the same partitions there.

// Reader returns the Scheduler as a forwarder.Reader, for
// forwarder.Config.Readers, when its Config has AsReader.
func (s *Scheduler) Reader() forwarder.Reader { return (*sharedReader)(s) }

// sharedReader is a Scheduler seen as a forwarder.Reader.
type sharedReader Scheduler

func (r *sharedReader) Topic() string { return r.cfg.Topics.Schedules() }

// Prepare creates the schedules topic, before the forwarders' client
// subscribes to it.
func (r *sharedReader) Prepare(ctx context.Context, adm *kadm.Client) error {
	n, err := ensureTopicRetrying(ctx, adm, &r.cfg)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.place = placeKey(r.Topic(), n)
	return nil
}

func (r *sharedReader) Start(cl *forwarder.ReaderClient) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rc = cl
}

func (r *sharedReader) Offsets(ctx context.Context, offsets map[int32]kgo.Offset) {
	_, _ = fromStart(ctx, map[string]map[int32]kgo.Offset{r.Topic(): offsets})
}

func (r *sharedReader) Assigned(ids []int32) {
	(*Scheduler)(r).onAssigned(context.Background(), nil, map[string][]int32{r.Topic(): ids})
}

func (r *sharedReader) Revoked(ctx context.Context, ids []int32) {
	(*Scheduler)(r).onRevoked(ctx, nil, map[string][]int32{r.Topic(): ids})
}

func (r *sharedReader) Lost(ctx context.Context, ids []int32) { r.Revoked(ctx, ids) }

func (r *sharedReader) Take(fps []kgo.FetchTopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.cfg.NowFunc()
	for _, fp := range fps {
		for _, rec := range fp.Records {
			r.st.apply(rec, now)
		}
	}
	(*Scheduler)(r).noteIndex()
	(*Scheduler)(r).wake()
}

// runShared steps until ctx ends, once no process of the earlier layout
// runs.
func (s *Scheduler) runShared(ctx context.Context) error {
	if err := s.waitOldGroup(ctx); err != nil {
		return err
	}
	committed := map[int32]int64{}
	for ctx.Err() == nil {
		if err := s.step(ctx); err != nil {
			return err
		}
		s.commitRead(ctx, committed)
		s.sleep(ctx)
	}
	return nil
}

// commitRead commits, for each partition loaded, the offset after the last
// record read, where it moved since the last commit (committed): the
// forwarders' group then shows no lag on the schedules topic once it is
// read, as on the stages' topics. The scheduler itself reads every
// partition from its start (Offsets).
func (s *Scheduler) commitRead(ctx context.Context, committed map[int32]int64) {
	s.mu.Lock()
	rc := s.rc
	read := map[int32]int64{}
	for id, p := range s.st.parts {
		if p.loaded && committed[id] != p.next {
			read[id] = p.next
		}
	}
	s.mu.Unlock()
	if len(read) == 0 || rc == nil {
		return
	}
	if err := rc.Commit(ctx, read); err != nil {
		if ctx.Err() == nil {
			s.cfg.Logger.Warn("schedules_commit_failed", "err", err)
		}
		return
	}
	maps.Copy(committed, read)
}

// sleep waits until the next occurrence is due, or wake. The step then
// reads back on the forwarders' client, whose fetches must not be long
// polls by that time.
func (s *Scheduler) sleep(ctx context.Context) {
	now := s.cfg.NowFunc()
	s.mu.Lock()
	wake := s.st.wake()
	rc := s.rc
	s.mu.Unlock()
	if rc != nil {
		rc.PromptFrom(wake)
	}
	d := maxIdle
	if !wake.IsZero() {
		d = min(d, wake.Sub(now))
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-s.wakeCh:
	case <-timer.C:
	}
}

// oldGroupCheckInterval is how often waitOldGroup asks.
var oldGroupCheckInterval = 10 * time.Second

// waitOldGroup returns once the scheduler's group of the earlier layout,
// "<group>.schedules", has no members, or ctx's error.
func (s *Scheduler) waitOldGroup(ctx context.Context) error {
	logged := false
	for {
		described, err := s.adm.DescribeGroups(ctx, s.cfg.group())
		if err == nil {
			err = described.Error()
		}
		if errors.Is(err, kerr.GroupIDNotFound) {
			err = nil // never made, or gone: as good as empty
		}
		members := 0
		if err == nil {
			members = len(described[s.cfg.group()].Members)
		}
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("wait for group %s to be empty: %w", s.cfg.group(), ctx.Err())
		case err == nil && members == 0:
			if logged {
				s.cfg.Logger.Info("schedules_old_group_empty", "group", s.cfg.group())
			}
			return nil
		case !logged:
			logged = true
			s.cfg.Logger.Warn("schedules_waiting_for_old_group", "group", s.cfg.group(), "members", members, "err", err,
				"why", "a kdelay of an earlier version runs its scheduler in this group; once none does, this process writes the occurrences")
		}
		select {
		case <-ctx.Done():
		case <-time.After(oldGroupCheckInterval):
		}
	}
}

// writeShared writes b into the forwarders' transaction, unlocks the step,
// and waits for the outcome. It reports whether the transaction committed.
func (s *Scheduler) writeShared(ctx context.Context, b batch, ends map[int32]int64, unlock func()) bool {
	s.mu.Lock()
	rc := s.rc
	s.mu.Unlock()
	var outcome <-chan bool
	err := errNoClient
	if rc != nil {
		outcome, err = rc.Produce(ctx, slices.Concat(b.records, b.progress), ends)
	}
	// The outcome comes once the forwarders end the transaction, which
	// may wait for a rebalance that waits for this step.
	unlock()
	if err == nil {
		select {
		case committed := <-outcome:
			if committed {
				return true
			}
			err = errors.New("transaction aborted")
		case <-ctx.Done():
			return false
		}
	}
	if ctx.Err() == nil {
		s.cfg.Logger.Warn("schedules_transaction_aborted", "partitions", slices.Sorted(maps.Keys(b.parts)), "err", err)
	}
	s.reload(s.ownedNow())
	return false
}

// sendShared sends a read-back's request on the forwarders' client.
func (s *Scheduler) sendShared(ctx context.Context, broker int32, req kmsg.Request) (kmsg.Response, error) {
	s.mu.Lock()
	rc := s.rc
	s.mu.Unlock()
	if rc == nil {
		return nil, errNoClient
	}
	return rc.Request(ctx, broker, req)
}

// errNoClient says the forwarders have not started their client yet.
var errNoClient = errors.New("the forwarders have no client yet")

// ownedNow are the partitions this process holds.
func (s *Scheduler) ownedNow() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owned()
}
