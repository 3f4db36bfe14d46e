package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

func TestLine(t *testing.T) {
	t.Parallel()
	due := time.UnixMilli(1795334400000)
	deliverAt := kgo.RecordHeader{Key: kdelay.HeaderDeliverAt, Value: []byte("1795334400000")}
	secondsLate := time.Date(2026, 11, 22, 8, 0, 1, 234_567_000, time.UTC)
	tests := []struct {
		name string
		r    *kgo.Record
		want string
	}{
		{"late", &kgo.Record{Partition: 1, Offset: 17, Key: []byte("k"), Value: []byte("hello"), Timestamp: due.Add(2345 * time.Microsecond),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("1")}, deliverAt}},
			due.Add(2345*time.Microsecond).Format("15:04:05.000") + `  1/17  late 2.3ms    key="k"  value="hello"  trace=1 kdelay-deliver-at=1795334400000`},
		{"within the millisecond", &kgo.Record{Value: []byte("v"), Timestamp: due, Headers: []kgo.RecordHeader{deliverAt}},
			due.Format("15:04:05.000") + `  0/0  late <1ms     key=-  value="v"  kdelay-deliver-at=1795334400000`},
		{"early", &kgo.Record{Value: []byte("v"), Timestamp: due.Add(-5 * time.Millisecond), Headers: []kgo.RecordHeader{deliverAt}},
			due.Add(-5*time.Millisecond).Format("15:04:05.000") + `  0/0  EARLY 5ms     key=-  value="v"  kdelay-deliver-at=1795334400000`},
		{"no header, binary value, spaced header", &kgo.Record{Value: []byte("a\nb"), Timestamp: due, Headers: []kgo.RecordHeader{{Key: "note", Value: []byte("two words")}}},
			due.Format("15:04:05.000") + `  0/0  -             key=-  value="a\nb"  note="two words"`},
		{"seconds late", &kgo.Record{Value: []byte("v"), Timestamp: secondsLate, Headers: []kgo.RecordHeader{{Key: kdelay.HeaderDeliverAt, Value: []byte("2026-11-22T08:00:00Z")}}},
			secondsLate.Format("15:04:05.000") + `  0/0  late 1.23s    key=-  value="v"  kdelay-deliver-at=2026-11-22T08:00:00Z`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := line(tt.r); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// A record read long after it arrived, as with --from-beginning (4.06s after
// its due time), is as late as its timestamp on the target says, not as late
// as the reading.
func TestLineFromBeginning(t *testing.T) {
	t.Parallel()
	due := time.UnixMilli(1795334400000)
	r := &kgo.Record{Value: []byte("v"), Timestamp: due.Add(32 * time.Millisecond),
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderDeliverAt, Value: []byte("1795334400000")}}}
	want := r.Timestamp.Format("15:04:05.000") + `  0/0  late 32ms     key=-  value="v"  kdelay-deliver-at=1795334400000`
	if got := line(r); got != want {
		t.Errorf("read 4.06s after its due time, a record that arrived 32ms late printed\n%s\nwant\n%s", got, want)
	}
}

// tail of a topic that does not exist yet says once that it waits for it,
// keeps waiting, and prints its records once it is created.
func TestTailWaitsForTopic(t *testing.T) {
	t.Parallel()
	bin, cluster := binary(t), kafkatest.New(t)
	topic := kafkatest.Name(t)
	cluster.DeleteOnCleanup(topic)
	out := &output{}
	cmd := command(bin, t.TempDir(), "tail", "--brokers", strings.Join(cluster.Brokers, ","), topic)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() }).Stop()
	want := "kdelay: topic " + topic + " does not exist on " + strings.Join(cluster.Brokers, ",") + " yet: waiting for it to be created (Ctrl-C to stop)\n"
	if !eventually(10*time.Second, func() bool { return strings.Contains(out.String(), want) }) {
		t.Fatalf("kdelay tail %s printed %q, want %q", topic, out, want)
	}

	cluster.CreateTopic(topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cluster.Client().ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("at last")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	printed := eventually(15*time.Second, func() bool { return strings.Contains(out.String(), `value="at last"`) })
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if !printed || err != nil || strings.Count(out.String(), "waiting for it") != 1 {
		t.Errorf("kdelay tail %s exited with %v after printing:\n%s\nwant the wait said once, then the record, then exit 0 on Ctrl-C", topic, err, out)
	}
}
