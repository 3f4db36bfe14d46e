package forwarder

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testReader is a Reader that keeps what it is given, as the scheduler
// would read the schedules topic: every partition from its start.
type testReader struct {
	topic string

	mu      sync.Mutex
	cl      *ReaderClient
	owned   map[int32]bool
	offsets map[int32][]int64 // taken, by partition
	revoked int               // partitions revoked or lost
}

func newTestReader(topic string) *testReader {
	return &testReader{topic: topic, owned: map[int32]bool{}, offsets: map[int32][]int64{}}
}

func (r *testReader) Topic() string { return r.topic }

func (r *testReader) Prepare(ctx context.Context, adm *kadm.Client) error {
	topics, err := adm.ListTopics(ctx, r.topic)
	if err == nil && !topics.Has(r.topic) {
		err = errors.New(r.topic + " does not exist")
	}
	return err
}

func (r *testReader) Start(cl *ReaderClient) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cl = cl
}

func (r *testReader) client() *ReaderClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cl
}

func (r *testReader) Offsets(_ context.Context, offsets map[int32]kgo.Offset) {
	for p := range offsets {
		offsets[p] = kgo.NewOffset().AtStart()
	}
}

func (r *testReader) Assigned(ids []int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		r.owned[id] = true
	}
}

func (r *testReader) Revoked(_ context.Context, ids []int32) { r.forget(ids) }
func (r *testReader) Lost(_ context.Context, ids []int32)    { r.forget(ids) }

func (r *testReader) forget(ids []int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		delete(r.owned, id)
		r.revoked++
	}
}

func (r *testReader) Take(fps []kgo.FetchTopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, fp := range fps {
		for _, rec := range fp.Records {
			r.offsets[rec.Partition] = append(r.offsets[rec.Partition], rec.Offset)
		}
	}
}

// taken waits up to deadline until n records were taken, and returns the
// offsets taken by partition and the partitions owned.
func (r *testReader) taken(n int, deadline time.Duration) (offsets map[int32][]int64, owned []int32) {
	end := time.Now().Add(deadline)
	for {
		r.mu.Lock()
		total := 0
		for _, o := range r.offsets {
			total += len(o)
		}
		offsets = map[int32][]int64{}
		for p, o := range r.offsets {
			offsets[p] = slices.Clone(o)
		}
		owned = nil
		for p := range r.owned {
			owned = append(owned, p)
		}
		r.mu.Unlock()
		if total >= n || time.Now().After(end) {
			slices.Sort(owned)
			return offsets, owned
		}
		time.Sleep(20 * time.Millisecond) // a deadline-bounded poll
	}
}

// TestReaderSharesTheGroup: a Reader's topic is read on the forwarders'
// client, in their one group, in either delivery: every partition is
// assigned to it and read from where its Offsets says (the start, past an
// offset committed before), each record once, records written later too; no
// other group is made; Reread reads a partition again; exactly-once, what
// it produces commits with the forwarders' transaction, its offsets too; a
// stop takes its partitions back.
func TestReaderSharesTheGroup(t *testing.T) {
	t.Parallel()
	for _, d := range []Delivery{AtLeastOnce, ExactlyOnce} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			readerSharesTheGroup(t, d)
		})
	}
}

func readerSharesTheGroup(t *testing.T, delivery Delivery) {
	fx := setup(t, []string{"1s"})
	fx.cfg.Delivery = delivery
	topic := fx.cfg.Topics.Prefix + ".extra"
	fx.cluster.CreateTopic(topic, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce := func(n int) {
		t.Helper()
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v")})
		}
		if err := fx.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	produce(30)
	adm := kadm.NewClient(fx.cl)
	before := kadm.Offsets{}
	for p := range int32(3) {
		before.Add(kadm.Offset{Topic: topic, Partition: p, At: 1, LeaderEpoch: -1})
	}
	if _, err := adm.CommitOffsets(ctx, fx.cfg.Group, before); err != nil {
		t.Fatalf("commit offsets before start: %v", err)
	}

	r := newTestReader(topic)
	cfg := fx.cfg
	cfg.Readers = []Reader{r}
	_, stop := fx.start(cfg)
	produce(6)
	offsets, owned := r.taken(36, 30*time.Second)
	if !slices.Equal(owned, []int32{0, 1, 2}) {
		t.Errorf("partitions assigned to the reader: %v, want [0 1 2]", owned)
	}
	total := 0
	for p, got := range offsets {
		total += len(got)
		for i, o := range got {
			if o != int64(i) {
				t.Errorf("partition %d: offsets taken %v, want 0, 1, 2, ... each once", p, got)
				break
			}
		}
	}
	if total != 36 {
		t.Errorf("took %d records, want the 36 written", total)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := r.client()
	rc.Reread(map[int32]int64{0: 0}, func() {})
	again, _ := r.taken(36+len(offsets[0]), 30*time.Second)
	if got, want := again[0], append(slices.Clone(offsets[0]), offsets[0]...); !slices.Equal(got, want) {
		t.Errorf("partition 0 after Reread from 0: offsets taken %v, want %v", got, want)
	}
	if err := rc.Commit(ctx, map[int32]int64{2: 3}); err != nil {
		t.Errorf("Commit: %v", err)
	}
	if at := committedAt(t, ctx, adm, fx.cfg.Group, topic, 2, 3); at != 3 {
		t.Errorf("%s partition 2 committed at %d after Commit, want 3", topic, at)
	}
	out := &kgo.Record{Topic: fx.target, Value: []byte("from the reader")}
	outcome, err := rc.Produce(ctx, []*kgo.Record{out}, map[int32]int64{1: 4})
	switch {
	case delivery == AtLeastOnce && !errors.Is(err, errNotTransactional):
		t.Errorf("Produce at-least-once: %v, want %v", err, errNotTransactional)
	case delivery == ExactlyOnce && err != nil:
		t.Errorf("Produce exactly-once: %v", err)
	case delivery == ExactlyOnce:
		select {
		case committed := <-outcome:
			if !committed {
				t.Fatal("the transaction of the reader's produce aborted")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the transaction of the reader's produce did not end within 30s")
		}
		if at := committedAt(t, ctx, adm, fx.cfg.Group, topic, 1, 4); at != 4 {
			t.Errorf("%s partition 1 committed at %d, want 4, committed with the transaction", topic, at)
		}
		if out.Offset < 0 || out.ProducerID < 0 {
			t.Errorf("the reader's record was not written: offset %d, producer id %d", out.Offset, out.ProducerID)
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	for _, g := range listed.Groups() {
		if strings.HasPrefix(g, fx.cfg.Group) && g != fx.cfg.Group {
			t.Errorf("group %s exists beside %s: a reader makes no group of its own", g, fx.cfg.Group)
		}
	}
	described, err := adm.DescribeGroups(ctx, fx.cfg.Group)
	if err != nil || described.Error() != nil {
		t.Fatalf("describe group %s: %v %v", fx.cfg.Group, err, described.Error())
	}
	assigned := described.AssignedPartitions()
	if got := assigned[topic]; len(got) != 3 {
		t.Errorf("group %s assigns %v of %s, want its 3 partitions", fx.cfg.Group, got, topic)
	}

	stop()
	if _, owned := r.taken(0, 0); len(owned) > 0 {
		t.Errorf("the reader still owns %v after the forwarder stopped", owned)
	}
}

// TestReaderNeedsATopicOfItsOwn: a reader of a stage's topic, or of another
// reader's, is refused with what to do.
func TestReaderNeedsATopicOfItsOwn(t *testing.T) {
	t.Parallel()
	cfg := Config{Brokers: []string{"127.0.0.1:1"}}
	ingress := cfg.WithDefaults().Topics.Ingress()
	for _, tc := range []struct {
		readers []Reader
		want    string
	}{
		{[]Reader{newTestReader(ingress)}, "which a forwarder reads"},
		{[]Reader{newTestReader("a"), newTestReader("a")}, "both read a"},
		{[]Reader{newTestReader("")}, "names no topic"},
	} {
		c := cfg
		c.Readers = tc.readers
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with readers of %q: %v, want an error saying %q", topics(tc.readers), err, tc.want)
		}
	}
}

func topics(readers []Reader) []string {
	var ts []string
	for _, r := range readers {
		ts = append(ts, r.Topic())
	}
	return ts
}

// committedAt waits up to 10 s for group's offset of topic's partition p to
// be want, and returns the last it saw (-1 for none). Apache Kafka shows a
// transaction's offsets once its marker is in the offsets topic, a moment
// after the commit.
func committedAt(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string, p int32, want int64) int64 {
	t.Helper()
	var at int64 = -1
	for end := time.Now().Add(10 * time.Second); at != want && time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		if o, ok := offs.Lookup(topic, p); ok {
			at = o.At
		}
	}
	return at
}
