package forwarder

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once, and the records behind one held in memory.
//
// A partition's commit point is its first record not handed on, and the
// replay after a crash or an abort starts there. Until 2026-11-29 a
// partition in exactly-once took no record while one taken before waited in
// memory (a remainder below the smallest level, a retry): the replay would
// have delivered again a record handed on behind it. Every record passes
// through a level as a remainder, so a level's partitions nearly always held
// one, and the records behind it waited for it: through a rolling restart at
// 200 records/s a read_committed consumer saw them 0.39–0.43 s late at the
// median, 1.75–1.82 s at p99 (kdelay bench faults --delivery exactly-once).
//
// Now a transaction commits, beside each commit point, the offsets above it
// already handed on (the skips), in the offset commit's metadata: atomically
// with the records. A replay takes the records at those offsets for handed
// on and drops them, whichever process replays: the group's next owner reads
// the metadata with the offsets (inherit). A partition that holds a record
// in memory takes no record while its window (what it took from its commit
// point on) holds maxTxnWindow, which keeps the metadata within Kafka's
// offset.metadata.max.bytes (4096 by default): runs of offsets as varints,
// about two bytes a run; and within what a reader takes (maxSkips). One that
// holds none takes as many as its buffer lets it, as before, so that a burst
// goes out in large transactions: the records it hands on leave no skips,
// since the commit point passes them, and a record it holds is the last of
// its window when held. Only a produce that fails behind many handed on (a
// retry held) can make more skips than fit: that transaction aborts and the
// replay takes them again.

// maxTxnWindow is how many records an exactly-once partition that holds a
// record in memory takes from its commit point on. Those past it wait in
// Kafka until the held one leaves, up to the smallest level later: a level
// partition that more records than this reach in that time falls behind.
// Its commit lists fewer offsets than that, which a reader takes up to
// maxSkips (decodeSkips): the rest of maxSkips is left for skips inherited
// from the last owner's commit and not read yet, beyond the window. Every
// other record held, the window's metadata fits in maxSkipsMeta.
const maxTxnWindow = 1536

// maxSkips and maxSkipRun bound what decodeSkips takes: offsets listed, and
// the offsets of one run. Every version of kdelay reads with these bounds,
// so they stay as they are: a commit a reader refuses is read on without
// its skips, and the records it lists are delivered again. encodeSkips cuts
// a longer run in runs of maxSkipRun, and txnPoints aborts a commit that
// would list more than maxSkips.
const (
	maxSkips   = 2048
	maxSkipRun = 512
)

// maxSkipsMeta is the longest metadata a commit sends: a partition whose
// skips need more (offsets far apart) aborts its transaction instead, and
// the replay takes its records again.
const maxSkipsMeta = 4000

// skipsPrefix starts the metadata of a commit with skips; one without it has
// none (Kafka's clients write the member id there).
const skipsPrefix = "kdelay-skips.1:"

// txnPoint is what a transaction commits for a partition: its commit point,
// and in meta the offsets above it handed on already.
type txnPoint struct {
	kgo.EpochOffset
	meta  string
	skips int // how many offsets meta lists
}

// skipped is the offsets from p's commit point on handed on already:
// records taken and done, and inherited skips not taken yet (from next on,
// which may be the commit point). mu must be held.
func (p *partition) skipped() []int64 {
	p.commitPoint()
	var offs []int64
	for _, e := range p.window {
		if e.done {
			offs = append(offs, e.offset)
		}
	}
	return append(offs, p.skips...)
}

// txnPoint is what a commit of p records now. mu must be held.
func (p *partition) txnPoint() txnPoint {
	pt, skipped := p.commitPoint(), p.skipped()
	return txnPoint{pt, encodeSkips(pt.Offset, skipped), len(skipped)}
}

// roomInWindow reports whether p may take another record in exactly-once.
func (p *partition) roomInWindow() bool {
	p.commitPoint()
	return len(p.window) < maxTxnWindow
}

// skipHead reports whether the head of p's queue is an inherited skip,
// handed on by a transaction committed before: it is dropped, not routed.
// Skips below it, offsets the partition does not hold (a transaction's
// marker), are forgotten.
func (p *partition) skipHead() bool {
	off := p.queue[0].Offset
	for len(p.skips) > 0 && p.skips[0] < off {
		p.skips = p.skips[1:]
	}
	if len(p.skips) > 0 && p.skips[0] == off {
		p.skips = p.skips[1:]
		return true
	}
	return false
}

// encodeSkips is the metadata of a commit at point with offs (ascending,
// from point on) handed on: "" with none. The commit point itself may be
// one: a partition whose records taken are all handed on commits the next
// offset to read, and that may be a record an earlier commit lists.
func encodeSkips(point int64, offs []int64) string {
	if len(offs) == 0 {
		return ""
	}
	var b []byte
	prev := point - 1
	for i := 0; i < len(offs); {
		j := i
		for j+1 < len(offs) && offs[j+1] == offs[j]+1 && j+1-i < maxSkipRun {
			j++
		}
		b = binary.AppendUvarint(b, uint64(offs[i]-prev)) // at least 1
		b = binary.AppendUvarint(b, uint64(j-i))          // the run's length less one
		prev, i = offs[j], j+1
	}
	return skipsPrefix + base64.RawURLEncoding.EncodeToString(b)
}

var errSkips = errors.New("commit metadata: not a list of kdelay skips")

// decodeSkips reads the offsets handed on from point on from a commit's
// metadata: none when it is not kdelay's.
func decodeSkips(point int64, meta string) ([]int64, error) {
	rest, ok := strings.CutPrefix(meta, skipsPrefix)
	if !ok {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return nil, errors.Join(errSkips, err)
	}
	var offs []int64
	prev := point - 1
	for len(b) > 0 {
		gap, n := binary.Uvarint(b)
		if n <= 0 || gap == 0 {
			return nil, errSkips
		}
		b = b[n:]
		run, n := binary.Uvarint(b)
		if n <= 0 || run >= maxSkipRun || len(offs)+int(run) >= maxSkips {
			return nil, errSkips
		}
		b = b[n:]
		start := prev + int64(gap)
		for k := range int64(run) + 1 {
			offs = append(offs, start+k)
		}
		prev = start + int64(run)
	}
	return offs, nil
}

// inherited is what a commit of a partition recorded: its offset and
// metadata, for the partition when it is read again from there.
type inherited struct {
	offset int64
	meta   string
}

// offsetsFetched keeps, for each partition of the worker's source assigned,
// the metadata committed with its offset (kgo.OnOffsetsFetched): the
// partition starts from that offset, and drops the records the metadata
// lists as handed on. It runs before fetching starts.
func (w *worker) offsetsFetched(resp *kmsg.OffsetFetchResponse) {
	w.handoff.mu.Lock()
	defer w.handoff.mu.Unlock()
	note := func(topic string, partition int32, offset int64, meta *string, code int16) {
		if topic != w.source || meta == nil || code != 0 || offset < 0 {
			return
		}
		if w.handoff.inherit == nil {
			w.handoff.inherit = map[int32]inherited{}
		}
		w.handoff.inherit[partition] = inherited{offset, *meta}
	}
	// Older requests answer in Topics, newer (v8 on) in Groups.
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			note(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
		}
	}
	for _, g := range resp.Groups {
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				note(t.Topic, p.Partition, p.Offset, p.Metadata, p.ErrorCode)
			}
		}
	}
}

// applyInherited gives p, just made, the skips of the commit it starts
// from. mu must be held.
func (w *worker) applyInherited(p *partition) {
	w.handoff.mu.Lock()
	in, ok := w.handoff.inherit[p.id]
	delete(w.handoff.inherit, p.id)
	w.handoff.mu.Unlock()
	if !ok {
		return
	}
	skips, err := decodeSkips(in.offset, in.meta)
	if err != nil {
		// Read on without them: a record handed on may be delivered
		// again, none lost.
		w.log.Error("commit_metadata_unreadable", "partition", p.id, "offset", in.offset, "err", err)
		return
	}
	p.skips, p.meta, p.metaAt = skips, in.meta, in.offset
}
