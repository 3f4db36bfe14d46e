package forwarder

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Moving from the per-stage layout (a consumer group a stage,
// stages.Config.LegacyGroups) to one group for every stage must neither read
// a record twice nor skip one (docs/design/one-client.md, "Upgrade from the
// per-stage layout"):
//
//   - The two layouts never consume at once. Each group gives a partition to
//     one of its members, but an old process and a new one are in different
//     groups and would both read it. So a new process takes nothing while
//     any old group has a member.
//   - The old groups' offsets are read with RequireStable: the open
//     transaction of an old process that crashed is aborted by its timeout
//     first, and until then the broker answers UNSTABLE_OFFSET_COMMIT.
//   - The new group gets, for each partition, the old offset where it has
//     none or a lower one, with its metadata (exactly-once's skips), in one
//     member-less OffsetCommit (generation -1, no member id). The broker takes that only while the group is empty; once
//     a member joined it answers UNKNOWN_MEMBER_ID: Apache Kafka in
//     ClassicGroup.validateOffsetCommit ("offset commits are only accepted
//     when the group is empty"; ConsumerGroup's, for KIP-848 groups, finds
//     no member ""), kfake in group.handleOffsetCommit (classic) and
//     handleConsumerOffsetCommit (KIP-848). So new processes that take over
//     at once all write the same values until the first one joins, and the
//     later ones are refused: the one that joined took over before it
//     joined, so the group holds the offsets already.
//   - Doing it again changes nothing: the old groups are empty, their
//     offsets no longer move, and the new group's are at or past them.

// upgradeCheckInterval is how often a new process asks whether the old
// layout's groups are empty: one DescribeGroups request. It starts this late
// at most after the last old process left.
const upgradeCheckInterval = 10 * time.Second

// upgrade is what a takeover needs to know.
type upgrade struct {
	to      string        // the one group every stage is read with
	from    []string      // the old layout's groups: stages.Config.LegacyGroups
	topics  []string      // the stage topics: the old groups' offsets of other topics are left
	brokers []string      // the cluster, named in the commands that delete the old groups
	every   time.Duration // how often to check the old groups while one has members; upgradeCheckInterval when 0
	log     *slog.Logger
	waiting func(why string) // told why it waits, each time it finds it must; nil: not told
}

// oldOffset is an offset an old group committed.
type oldOffset struct {
	kadm.Offset
	group string
}

// errOldBusy says an old group has members, or a transaction pending on its
// offsets: the takeover waits.
var errOldBusy = errors.New("the old layout's groups are in use")

// takeOver waits until no old group has members, then commits into u.to each
// old offset it lacks. It returns when that is done or refused (u.to has
// members), ctx's error when ctx ends first, or the error of a request that
// failed for good. A request that failed with an error worth retrying is
// tried again, from the start, after a backoff: a cluster that has never
// had a consumer group creates its offsets topic at the first group request,
// and answers COORDINATOR_NOT_AVAILABLE meanwhile (a first start on Apache
// Kafka failed so).
func takeOver(ctx context.Context, adm *kadm.Client, u upgrade) error {
	for backoff := retryBackoffMin; ; backoff = min(2*backoff, u.interval()) {
		err := u.once(ctx, adm)
		if err == nil || ctx.Err() != nil || !kerr.IsRetriable(err) {
			return err
		}
		u.log.Info("old_layout_check_retried", "in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("take the old layout's offsets over: %w", ctx.Err())
		case <-time.After(backoff):
		}
	}
}

// once is one try of takeOver.
func (u upgrade) once(ctx context.Context, adm *kadm.Client) error {
	old, err := u.waitOld(ctx, adm)
	if err != nil {
		return err
	}
	return u.commit(ctx, adm, old)
}

// waitOld returns the old groups' offsets once every old group is empty, and
// checks again every u.interval() until then.
func (u upgrade) waitOld(ctx context.Context, adm *kadm.Client) ([]oldOffset, error) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		// A request that ctx cut short says what it waited for too.
		if ctx.Err() != nil {
			return nil, fmt.Errorf("wait for the old layout's groups %s to be empty: %w", strings.Join(u.from, ","), ctx.Err())
		}
		old, err := u.readOld(ctx, adm)
		if ctx.Err() == nil && !errors.Is(err, errOldBusy) {
			return old, err
		}
		timer.Reset(u.interval())
	}
}

// interval is how often the old groups are checked while one has members.
func (u upgrade) interval() time.Duration { return cmp.Or(u.every, upgradeCheckInterval) }

// readOld returns the old groups' offsets of the stage topics, or errOldBusy
// (and says why in the log) while an old group has members or a pending
// transactional commit.
func (u upgrade) readOld(ctx context.Context, adm *kadm.Client) ([]oldOffset, error) {
	members, err := u.oldMembers(ctx, adm)
	if err != nil {
		return nil, err
	}
	if len(members) > 0 {
		groups := slices.Sorted(maps.Keys(members))
		u.log.Info("waiting_for_old_layout", "groups", groups, "members", members, "check_every", u.interval())
		u.tell(fmt.Sprintf("waiting for the processes of the other layout (another version, or the other delivery mode) to stop: groups %s have members", strings.Join(groups, ",")))
		return nil, errOldBusy
	}
	old, err := u.oldOffsets(kadm.RequireStable(ctx), adm)
	if errors.Is(err, kerr.UnstableOffsetCommit) {
		u.log.Info("waiting_for_old_transactions", "err", err, "check_every", u.interval())
		u.tell("waiting for the other layout's open transactions to end")
		return nil, errOldBusy
	}
	return old, err
}

// tell passes why to u.waiting, if set.
func (u upgrade) tell(why string) {
	if u.waiting != nil {
		u.waiting(why)
	}
}

// oldMembers are the members of each old group that has any: their instance
// ids, or member ids where they have none.
func (u upgrade) oldMembers(ctx context.Context, adm *kadm.Client) (map[string][]string, error) {
	described, err := adm.DescribeGroups(ctx, u.from...)
	if err != nil {
		return nil, fmt.Errorf("describe the old layout's groups %s: %w", strings.Join(u.from, ","), err)
	}
	members := map[string][]string{}
	for _, g := range described {
		switch {
		case errors.Is(g.Err, kerr.GroupIDNotFound): // never used, or deleted
			continue
		case g.Err != nil:
			return nil, fmt.Errorf("describe the old layout's group %s: %w", g.Group, g.Err)
		}
		for _, m := range g.Members {
			id := m.MemberID
			if m.InstanceID != nil {
				id = cmp.Or(*m.InstanceID, id)
			}
			members[g.Group] = append(members[g.Group], id)
		}
	}
	return members, nil
}

// oldOffsets are the offsets the old groups committed on the stage topics,
// by topic and partition. Each stage reads its own topic, so two groups
// should not have committed the same partition; if they did, the higher
// offset is taken.
func (u upgrade) oldOffsets(ctx context.Context, adm *kadm.Client) ([]oldOffset, error) {
	old := map[string]map[int32]oldOffset{}
	for g, r := range adm.FetchManyOffsets(ctx, u.from...) {
		switch {
		case errors.Is(r.Err, kerr.GroupIDNotFound): // never committed
			continue
		case r.Err != nil:
			return nil, fmt.Errorf("committed offsets of the old layout's group %s: %w", g, r.Err)
		}
		for _, topic := range u.topics {
			for p, o := range r.Fetched[topic] {
				if o.Err != nil {
					return nil, fmt.Errorf("committed offset of the old layout's group %s on %s/%d: %w", g, topic, p, o.Err)
				}
				if old[topic] == nil {
					old[topic] = map[int32]oldOffset{}
				}
				if had, ok := old[topic][p]; o.At >= 0 && (!ok || o.At > had.At) {
					// With its metadata: an exactly-once commit lists
					// there the records above the offset handed on
					// already (txn_skips.go), which must not be again.
					old[topic][p] = oldOffset{kadm.Offset{Topic: topic, Partition: p, At: o.At, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}, g}
				}
			}
		}
	}
	var all []oldOffset
	for _, topic := range slices.Sorted(maps.Keys(old)) {
		for _, p := range slices.Sorted(maps.Keys(old[topic])) {
			all = append(all, old[topic][p])
		}
	}
	return all, nil
}

// commit commits into u.to what it lacks of old, and says what it took and
// how to delete the old groups.
func (u upgrade) commit(ctx context.Context, adm *kadm.Client, old []oldOffset) error {
	if len(old) == 0 {
		return nil // nothing to take, and no old group to delete: the steady state
	}
	take, err := u.lacking(ctx, adm, old)
	if err != nil {
		return err
	}
	if len(take) > 0 {
		offsets := kadm.Offsets{}
		for _, o := range take {
			offsets.Add(o.Offset)
		}
		committed, err := adm.CommitOffsets(ctx, u.to, offsets)
		if err == nil {
			err = committed.Error()
		}
		switch {
		case errors.Is(err, kerr.UnknownMemberID):
			return u.refused(ctx, adm, old, err)
		case err != nil:
			return fmt.Errorf("commit the old layout's offsets into group %s: %w", u.to, err)
		}
	}
	u.log.Info("old_groups_taken_over", "group", u.to, "partitions", len(take), "taken", byGroup(take), "delete_with", u.deleteHints(old))
	return nil
}

// refused is a commit u.to refused because it has members. The process that
// joined first took the offsets over before it joined, so u.to holds them: it
// is read again to say so, or to warn about what it lacks.
func (u upgrade) refused(ctx context.Context, adm *kadm.Client, old []oldOffset, refusal error) error {
	lack, err := u.lacking(ctx, adm, old)
	if err != nil {
		return err
	}
	if len(lack) > 0 {
		// A process joined u.to without taking over: its members read
		// these partitions from their own commits or reset offsets.
		u.log.Warn("old_offsets_not_taken", "group", u.to, "partitions", len(lack), "lacking", byGroup(lack), "err", refusal)
		return nil
	}
	u.log.Info("old_groups_taken_over", "group", u.to, "partitions", 0, "taken_by", "a member of the group", "delete_with", u.deleteHints(old))
	return nil
}

// lacking are the old offsets u.to has none of, or a lower one.
func (u upgrade) lacking(ctx context.Context, adm *kadm.Client, old []oldOffset) ([]oldOffset, error) {
	now, err := adm.FetchOffsets(ctx, u.to)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("committed offsets of group %s: %w", u.to, err)
	}
	var lack []oldOffset
	for _, o := range old {
		had, ok := now.Lookup(o.Topic, o.Partition)
		if ok && had.Err != nil {
			return nil, fmt.Errorf("committed offset of group %s on %s/%d: %w", u.to, o.Topic, o.Partition, had.Err)
		}
		if !ok || had.At < o.At {
			lack = append(lack, o)
		}
	}
	return lack, nil
}

// deleteHints are the commands that delete the old groups that committed
// old, to run once no process of the old layout is left to start again.
func (u upgrade) deleteHints(old []oldOffset) string {
	var hints []string
	for _, g := range u.from {
		if byGroup(old)[g] > 0 {
			hints = append(hints, deleteGroupHint(u.brokers, g))
		}
	}
	return strings.Join(hints, "; ")
}

// byGroup counts offsets by the old group they came from.
func byGroup(old []oldOffset) map[string]int {
	n := map[string]int{}
	for _, o := range old {
		n[o.group]++
	}
	return n
}
