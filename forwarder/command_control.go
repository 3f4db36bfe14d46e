package forwarder

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// Headers of a mark, the record a forwarder writes to the control topic under
// the key NUL + id when it applies a command (see mark).
const (
	headerMatched = "kdelay-matched" // partition/offset of the command applied
	headerMoved   = "kdelay-moved"   // source of the record a scan moved ahead
)

// controlReader reads the whole control topic, from its start, into cmds,
// and keeps reading it: every process needs every command, since any of its
// forwarders may hold the record a command is for.
type controlReader struct {
	cfg      *Config
	cmds     *commands
	cl       *kgo.Client
	rules    kdelay.Rules
	loaded   chan struct{}                       // closed once what was written before Run began is read
	onDue    func()                              // called when a command falls due unmatched (command_scan.go)
	onNotice func(instance string, at time.Time) // called for another process's membership notice (membership_beats.go)
	duty     func() bool                         // reports whether this process reports unmatched commands
}

// newControlReader reads with cl, a client made by NewPlainClient, which
// consumes the control topic and which nothing else polls.
func newControlReader(cfg *Config, cmds *commands, cl *kgo.Client) *controlReader {
	return &controlReader{
		cfg: cfg, cmds: cmds, cl: cl,
		rules:  kdelay.Rules{Topics: cfg.Topics, MaxDelay: cfg.MaxDelay},
		loaded: make(chan struct{}),
		onDue:  func() {}, duty: func() bool { return false }, onNotice: func(string, time.Time) {},
	}
}

// run reads until ctx ends. It first finds where each partition starts and
// ends, so that loaded means every command written before kdelay started is
// in force: a forwarder restarted mid-way honours them all.
func (r *controlReader) run(ctx context.Context) error {
	starts, ends, err := r.bounds(ctx)
	if err != nil {
		return err
	}
	// Every partition from where it starts, all at once, now that the
	// broker answered for each. Added as a topic instead, the client
	// would ask where each starts itself: on Kafka 3.9.1 a partition
	// created a moment before was refused, loaded a second later, and
	// then waited for the fetch already sent for the others, up to 5 s,
	// so a command written as kdelay started was read after the record
	// it named had left (TestCommandRightAfterStart). Removed at the
	// end, so that a reader on the same client later reads the topic
	// from its start again.
	r.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{r.cfg.Topics.Control(): starts})
	defer r.cl.PurgeTopicsFromConsuming(r.cfg.Topics.Control())
	if len(ends) == 0 {
		close(r.loaded)
	}
	interval := sweepInterval(r.cmds.ttl)
	lastSweep := r.cfg.NowFunc()
	for ctx.Err() == nil {
		now := r.cfg.NowFunc()
		next, grew := r.cmds.promote(now)
		if grew {
			r.onDue()
		}
		wakeAt := earliest(next, lastSweep.Add(interval))
		wake, cancel := context.WithDeadline(ctx, wakeAt)
		fetches := r.cl.PollFetches(wake)
		cancel()
		if fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil && wake.Err() == nil {
				r.cfg.Logger.Warn("control_fetch_failed", "topic", t, "partition", p, "err", err)
			}
		})
		fetches.EachRecord(r.apply)
		if len(ends) > 0 {
			fetches.EachRecord(func(rec *kgo.Record) {
				if end, ok := ends[rec.Partition]; ok && rec.Offset+1 >= end {
					delete(ends, rec.Partition)
				}
			})
			if len(ends) == 0 {
				close(r.loaded)
			}
		}
		if now := r.cfg.NowFunc(); now.Sub(lastSweep) >= interval {
			lastSweep = now
			r.expire(now)
		}
	}
	return nil
}

// bounds returns where each partition of the control topic starts, and, for
// each one holding records, the offset after its last one. A broker that
// does not serve the topic yet is asked again, for up to
// topicsServedTimeout: on a cluster, the broker that said a topic kdelay
// just created is served may not lead its partitions, and their leaders
// answered UNKNOWN_TOPIC_OR_PARTITION for a moment, which stopped kdelay
// serve at start (2 of 14 runs on 3 nodes, issue 20).
func (r *controlReader) bounds(ctx context.Context) (starts map[int32]kgo.Offset, ends map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, topicsServedTimeout)
	defer cancel()
	for backoff := retryBackoffMin; ; backoff = min(2*backoff, time.Second) {
		starts, ends, err = r.tryBounds(ctx)
		if err == nil || !kerr.IsRetriable(err) {
			return starts, ends, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(backoff):
		}
	}
}

func (r *controlReader) tryBounds(ctx context.Context) (map[int32]kgo.Offset, map[int32]int64, error) {
	adm := kadm.NewClient(r.cl)
	topic := r.cfg.Topics.Control()
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read where %s starts: %w", topic, err)
	}
	// Where read_committed reading ends now: a transaction left open by a
	// process that died (a mark it wrote) must not hold the start back
	// until the broker times it out.
	endOffs, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = endOffs.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read where %s ends: %w", topic, err)
	}
	from, ends := map[int32]kgo.Offset{}, map[int32]int64{}
	starts.Each(func(o kadm.ListedOffset) { from[o.Partition] = kgo.NewOffset().At(o.Offset) })
	endOffs.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); o.Offset > 0 && (!ok || s.Offset < o.Offset) {
			ends[o.Partition] = o.Offset
		}
	})
	return from, ends, nil
}

// apply takes one record of the control topic into cmds.
func (r *controlReader) apply(rec *kgo.Record) {
	if rec.Attrs.IsControl() {
		return
	}
	if instance, ok := parseNotice(rec); ok {
		r.onNotice(instance, rec.Timestamp)
		return
	}
	if len(rec.Key) > 0 && rec.Key[0] == 0 {
		if m, ok := parseMark(rec); ok {
			r.cmds.mark(string(rec.Key[1:]), m)
		}
		return
	}
	if rec.Value == nil {
		r.cmds.clear(string(rec.Key))
		return
	}
	if rec.Timestamp.Before(r.cfg.NowFunc().Add(-r.cmds.ttl)) {
		return // expired: every record it could be for has left its level
	}
	c, err := kdelay.ParseCommand(rec.Timestamp, rec.Key, rec.Headers, r.rules)
	if err != nil {
		r.cmds.clear(string(rec.Key))
		r.cmds.count(func(s *CommandStats) { s.Invalid++ })
		r.cfg.Logger.Warn("command_invalid", "source", source(rec), "id", string(rec.Key), "err", err)
		return
	}
	cmd := command{name: cmdNames[c.Name], part: rec.Partition, off: rec.Offset, at: rec.Timestamp.UnixMilli()}
	if !c.Due.IsZero() {
		cmd.due = c.Due.UnixMilli()
	}
	r.cmds.set(c.ID, cmd)
}

// expire forgets commands older than ttl and reports those that matched
// nothing, if this process is the one that reports.
func (r *controlReader) expire(now time.Time) {
	unmatched := r.cmds.expire(now)
	r.cmds.prune(now)
	if len(unmatched) == 0 || !r.duty() {
		return
	}
	r.cmds.count(func(s *CommandStats) { s.Unmatched += int64(len(unmatched)) })
	// A line per command, up to a bound per sweep: a million cancels that
	// came after their deliveries must not become a million log lines.
	for _, id := range unmatched[:min(len(unmatched), unmatchedLogged)] {
		r.cfg.Logger.Warn("command_unmatched", "id", id,
			"reason", "no record with this id was pending while the command was kept: it was delivered before, or the id is unknown")
	}
	if n := len(unmatched) - unmatchedLogged; n > 0 {
		r.cfg.Logger.Warn("commands_unmatched_not_logged", "count", n,
			"reason", "more than "+strconv.Itoa(unmatchedLogged)+" commands matched no record in one sweep; each is counted in kdelay_commands_total{result=\"unmatched\"}")
	}
}

// unmatchedLogged bounds the command_unmatched lines of one sweep.
const unmatchedLogged = 100

// sweepInterval is how often commands past ttl are forgotten: often enough
// that one outlives ttl by a sixteenth at most, and at least once a minute.
func sweepInterval(ttl time.Duration) time.Duration {
	return min(max(ttl/16, 100*time.Millisecond), time.Minute)
}

// markRecord is the mark of applying cmd to the record of id; moved is that
// record's source when a scan moved it ahead of its level.
func markRecord(topic, id string, cmd command, moved string) *kgo.Record {
	hs := []kgo.RecordHeader{{Key: headerMatched, Value: []byte(strconv.Itoa(int(cmd.part)) + "/" + strconv.FormatInt(cmd.off, 10))}}
	if moved != "" {
		hs = append(hs, kgo.RecordHeader{Key: headerMoved, Value: []byte(moved)})
	}
	return &kgo.Record{Topic: topic, Key: append([]byte{0}, id...), Value: []byte{}, Headers: hs}
}

func parseMark(rec *kgo.Record) (mark, bool) {
	var m mark
	ok := false
	for _, h := range rec.Headers {
		switch h.Key {
		case headerMatched:
			p, o, found := strings.Cut(string(h.Value), "/")
			part, err1 := strconv.ParseInt(p, 10, 32)
			off, err2 := strconv.ParseInt(o, 10, 64)
			m.part, m.off, ok = int32(part), off, found && err1 == nil && err2 == nil
		case headerMoved:
			m.moved = string(h.Value)
		}
	}
	return m, ok
}
