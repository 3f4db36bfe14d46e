package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kdelay/kdelay/kafkatest"
)

// TestExactlyOnceOneGroupOneProducer: `kdelay serve --delivery exactly-once`
// reads every stage and the schedules topic in the one consumer group
// <group> and produces with one transactional producer, as at-least-once
// reads with one group: a deployment is one group whatever its levels, and
// a process one transactional id, <instance-id>.<group>. Managed clusters
// count and cap both; until 2026-11-29 exactly-once had a group and a
// producer a stage: 20 groups with the 18 default levels, 5 with the test's
// three; until 2026-11-30 the scheduler had a group and a transactional id
// of its own, <group>.schedules.
func TestExactlyOnceOneGroupOneProducer(t *testing.T) {
	t.Parallel()
	x := setupExactlyOnce(t)
	x.start()
	const n = 20
	<-x.write(n, 10*time.Millisecond, 3*time.Second)
	if got := x.got.Until(30*time.Second, func(got []kafkatest.Arrival) bool { return len(kafkatest.IDs(got)) >= n }); len(kafkatest.IDs(got)) < n {
		t.Fatalf("%d of %d records delivered within 30s", len(kafkatest.IDs(got)), n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(x.cluster.Client())
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	var groups []string
	for _, g := range listed.Sorted() {
		if strings.HasPrefix(g.Group, x.name) {
			groups = append(groups, g.Group)
		}
	}
	if want := []string{x.name}; !slices.Equal(groups, want) {
		t.Errorf("the consumer groups %q, want %q", groups, want)
	}
	described, err := adm.DescribeGroups(ctx, x.name)
	if err != nil {
		t.Fatalf("describe group %s: %v", x.name, err)
	}
	if got := described.AssignedPartitions()[x.name+".schedules"]; len(got) == 0 {
		t.Errorf("group %s assigns no partition of %s.schedules: the scheduler reads it in the forwarders' group", x.name, x.name)
	}

	txns, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatalf("list transactions: %v", err)
	}
	var ids []string
	for _, tx := range txns.Sorted() {
		if strings.HasPrefix(tx.TxnID, "eos."+x.name) {
			ids = append(ids, tx.TxnID)
		}
	}
	if want := []string{"eos." + x.name}; !slices.Equal(ids, want) {
		t.Errorf("the transactional ids %q, want %q", ids, want)
	}
}
