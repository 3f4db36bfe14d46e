package forwarder

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A transactional producer is fenced (PRODUCER_FENCED) when the broker
// bumped its epoch: another producer initialised the same transactional id,
// or the coordinator aborted a transaction that outlived its timeout, as
// when a cluster loses its quorum for longer than that (issue 20: one
// process stopped with "begin transaction: PRODUCER_FENCED" after two of
// three brokers were down for seconds). franz-go cannot go on with a fenced
// producer; only the first cause means another process took over. The
// group tells them apart: a process with the same instance id joins the
// group too, and takes the member of that static instance id. If the member
// is still ours, the stages start again with a new client and producer
// session; if another holds it, this process is the one that must go.

// errRenew is what the transaction loop stops with when its producer session
// cannot go on but no other process took over (a fence while no other
// process holds the instance id, or a producer id franz-go failed for
// good): the Forwarder starts its stages again with a new session.
var errRenew = errors.New("transactional producer session must start again")

// fencedTxn is a fenced producer's error as the process's stages stop with
// it: errRenew if no other member holds the instance id, the error that says
// to give each process its own instance id if one does.
func (t *txnLoop) fencedTxn(ctx context.Context, err error) error {
	id := TransactionalID(t.cfg.InstanceID, t.cfg.Group, t.cfg.TransactionalIDSuffix)
	if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
		// Not a fence at all: renewing would be refused the same way.
		return fmt.Errorf("transactional id %s: %w; allow this principal WRITE and DESCRIBE on transactional ids starting with %q",
			id, err, t.cfg.InstanceID)
	}
	other, derr := InstanceHeldElsewhere(ctx, t.sess.Client(), t.cfg.Group, t.cfg.InstanceID, t.cfg.ShutdownTimeout)
	if derr != nil {
		t.log.Warn("instance_id_holder_unknown", "err", derr)
	}
	if other {
		return fmt.Errorf("transactional id %s: %w; another kdelay process uses it: %w", id, err, ErrInstanceIDTaken)
	}
	return fmt.Errorf("%w: fenced while no other process holds the instance id: %w", errRenew, err)
}

// InstanceHeldElsewhere reports whether a member of group other than cl's
// own holds the static instance id, asking for at most timeout. A process
// whose producer was fenced uses it to tell another process with its
// instance id from a broker that fenced it on its own (the forwarder and
// the scheduler). A group that cannot be described counts as not: renewing
// when in doubt fences the other producer, which then looks at the group in
// turn, where one of the two members has been replaced by then.
func InstanceHeldElsewhere(ctx context.Context, cl *kgo.Client, group, instanceID string, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	groups, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	if err == nil {
		err = groups.Error()
	}
	if err != nil {
		return false, err
	}
	ours, _ := cl.GroupMetadata()
	for _, m := range groups[group].Members {
		if m.InstanceID != nil && *m.InstanceID == instanceID && m.MemberID != ours {
			return true, nil
		}
	}
	return false, nil
}
