package kfake

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestCommitSurvivesCrash kills the broker's disk in the middle of a
// commit: a transaction produced a record to each of 3 partitions and
// staged the offset 7 for group g, then the process died after the commit
// wrote `markers` of its 3 markers. Once the commit has begun writing its
// markers, the transaction is committed after the restart in every
// partition, offset included; before, it is aborted in every partition.
// Anything else is a duplicate for a consume-transform-produce client
// (records committed, its input re-read) or a loss.
func TestCommitSurvivesCrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		markers   int
		committed bool
	}{
		{"before the first marker", 0, false},
		{"after the first marker", 1, true},
		{"after every marker, before the offsets", 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			disk := &crashFS{fs: newMemFS()}
			commitThenCrash(t, disk, tc.markers)
			visible, offset := afterRestart(t, disk.fs)
			want, wantOffset := 0, int64(-1)
			if tc.committed {
				want, wantOffset = 3, 7
			}
			if visible != want || offset != wantOffset {
				t.Errorf("after the restart %d of the transaction's 3 records are committed and group g's offset is %d, want %d and %d", visible, offset, want, wantOffset)
			}
		})
	}
}

// commitThenCrash runs the transaction on a broker writing to disk, and
// lets only `markers` marker writes of its commit reach the disk.
func commitThenCrash(t *testing.T, disk *crashFS, markers int) {
	c, err := NewCluster(withFS(disk), NumBrokers(1), SeedTopics(3, "out"), SeedTopics(1, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // writes nothing: the disk has crashed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// TxnOffsetCommit v5 and older name topics, not topic ids.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxVersions(kversion.V3_9_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Partition: p, Value: []byte("txn")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	stageOffset(ctx, t, cl, 7)
	disk.crashAfter(markers)
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// stageOffset adds group g's offset for in/0 to the open transaction.
func stageOffset(ctx context.Context, t *testing.T, cl *kgo.Client, offset int64) {
	t.Helper()
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = "tx", id, epoch, "g"
	if resp, err := add.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v, error code %v", err, resp)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", "g", id, epoch, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "in"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v, %v", err, resp)
	}
}

// afterRestart starts a broker on what reached the disk and returns how
// many of the transaction's records a read_committed consumer sees, and
// group g's offset for in/0 (-1 if none).
func afterRestart(t *testing.T, disk fs) (visible int, offset int64) {
	c, err := NewCluster(withFS(disk), NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A plain record after the transaction in each partition: once the
	// consumer has read the three, it has read all the transaction left.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(3) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Partition: p, Value: []byte("end")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for ends := 0; ends < 3; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of the 3 records written after the restart within 10s", ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				ends++
			} else {
				visible++
			}
		})
	}
	offsets, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	if errors.Is(err, kerr.GroupIDNotFound) {
		return visible, -1
	}
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offsets.Lookup("in", 0); ok {
		return visible, o.At
	}
	return visible, -1
}

// crashFS passes writes to fs until the process "dies": after
// crashAfter(n), n more record batches (a segment write, then its index
// entry) reach fs, then nothing does, as if SIGKILL had struck.
type crashFS struct {
	fs
	mu      sync.Mutex
	armed   bool
	left    int
	crashed bool
}

func (d *crashFS) crashAfter(batches int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed, d.left, d.crashed = true, batches, batches == 0
}

func (d *crashFS) dead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crashed
}

// wrote counts a write that reached fs; an index entry ends a batch.
func (d *crashFS) wrote(index bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed && index {
		d.left--
		d.crashed = d.left <= 0
	}
}

func (d *crashFS) OpenFile(name string, flag int, perm os.FileMode) (file, error) {
	if d.dead() && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		return deadFile{}, nil
	}
	f, err := d.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &crashFile{file: f, disk: d, index: strings.HasSuffix(name, ".idx")}, nil
}

func (d *crashFS) Rename(from, to string) error {
	if d.dead() {
		return nil
	}
	return d.fs.Rename(from, to)
}

func (d *crashFS) Remove(name string) error {
	if d.dead() {
		return nil
	}
	return d.fs.Remove(name)
}

func (d *crashFS) RemoveAll(path string) error {
	if d.dead() {
		return nil
	}
	return d.fs.RemoveAll(path)
}

type crashFile struct {
	file
	disk  *crashFS
	index bool
}

func (f *crashFile) Write(b []byte) (int, error) {
	if f.disk.dead() {
		return len(b), nil
	}
	n, err := f.file.Write(b)
	f.disk.wrote(f.index)
	return n, err
}

func (f *crashFile) Truncate(size int64) error {
	if f.disk.dead() {
		return nil
	}
	return f.file.Truncate(size)
}

// deadFile is a file opened for writing after the crash.
type deadFile struct{}

func (deadFile) Write(b []byte) (int, error)    { return len(b), nil }
func (deadFile) Read([]byte) (int, error)       { return 0, io.EOF }
func (deadFile) Close() error                   { return nil }
func (deadFile) Seek(int64, int) (int64, error) { return 0, nil }
func (deadFile) Truncate(int64) error           { return nil }
func (deadFile) Sync() error                    { return nil }
