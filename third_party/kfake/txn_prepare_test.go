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
// transaction that produces a record to each of 3 partitions and stages
// the offset 7 for group g: while it produces, or after its commit wrote
// some of its 3 markers. Once the commit has begun writing its markers,
// the transaction is committed after the restart in every partition,
// offset included; before, it is aborted in every partition. Anything else
// is a duplicate for a consume-transform-produce client (records
// committed, its input re-read) or a loss.
func TestCommitSurvivesCrash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		crash     crashPoint
		committed bool
	}{
		{"after the third record's segment write, before its index entry", crashPoint{before: 2, suffix: ".dat", writes: 1}, false},
		{"before the first marker", crashPoint{before: 3, suffix: ".idx", writes: 0}, false},
		{"after the first marker", crashPoint{before: 3, suffix: ".idx", writes: 1}, true},
		{"after every marker, before the offsets", crashPoint{before: 3, suffix: ".idx", writes: 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			disk := &crashFS{fs: newMemFS()}
			commitThenCrash(t, disk, tc.crash)
			want, wantOffset := 0, int64(-1)
			if tc.committed {
				want, wantOffset = 3, 7
			}
			// Twice: what the first restart repaired and appended must
			// read back the same on the next.
			for _, restart := range []string{"first", "second"} {
				visible, offset := afterRestart(t, disk.fs, restart)
				if visible != want || offset != wantOffset {
					t.Errorf("after the %s restart %d of the transaction's 3 records are committed and group g's offset is %d, want %d and %d", restart, visible, offset, want, wantOffset)
				}
			}
		})
	}
}

// crashPoint is where the disk dies: once writes more writes to files
// ending in suffix reach it, counted from just before the transaction's
// record to partition `before` is produced (3: before the commit).
type crashPoint struct {
	before int32
	suffix string
	writes int
}

// commitThenCrash runs the transaction on a broker writing to disk that
// dies at crash.
func commitThenCrash(t *testing.T, disk *crashFS, crash crashPoint) {
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
		if p == crash.before {
			disk.crashAfter(crash.writes, crash.suffix)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Partition: p, Value: []byte("txn")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	stageOffset(ctx, t, cl, 7)
	if crash.before == 3 {
		disk.crashAfter(crash.writes, crash.suffix)
	}
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
func afterRestart(t *testing.T, disk fs, restart string) (visible int, offset int64) {
	// This broker too dies rather than stops once it has answered: the
	// next restart loads what a crash left, not what a clean stop saves.
	crashing := &crashFS{fs: disk}
	defer crashing.crashAfter(0, "")
	c, err := NewCluster(withFS(crashing), NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // writes nothing: the disk has crashed
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A plain record after the transaction in each partition, named after
	// the restart: once the consumer has read the three, it has read all
	// the transaction left.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for p := range int32(3) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "out", Partition: p, Value: []byte(restart)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for ends := 0; ends < 3; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of the 3 records written after the restart within 10s", ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch string(r.Value) {
			case restart:
				ends++
			case "txn":
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
// crashAfter(n, suffix), once n more writes to files whose names end in
// suffix have reached fs, nothing does, as if SIGKILL had struck. A record
// batch is a segment write (.dat), then its index entry (.idx).
type crashFS struct {
	fs
	mu      sync.Mutex
	suffix  string
	left    int
	crashed bool
}

func (d *crashFS) crashAfter(writes int, suffix string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.suffix, d.left, d.crashed = suffix, writes, writes == 0
}

func (d *crashFS) dead() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.crashed
}

// wrote counts a write to name that reached fs.
func (d *crashFS) wrote(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.suffix != "" && strings.HasSuffix(name, d.suffix) {
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
	return &crashFile{file: f, disk: d, name: name}, nil
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
	disk *crashFS
	name string
}

func (f *crashFile) Write(b []byte) (int, error) {
	if f.disk.dead() {
		return len(b), nil
	}
	n, err := f.file.Write(b)
	f.disk.wrote(f.name)
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
