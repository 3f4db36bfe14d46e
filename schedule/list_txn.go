package schedule

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committed passes on the records of a partition read uncommitted that a
// read_committed reader would see: a record written outside a transaction
// at once, a transaction's records at its commit marker, an aborted
// transaction's never. List reads this way, to the high watermark, rather
// than read_committed to the last stable offset: a transaction that kdelay's
// embedded broker aborted as it loaded its data directory has no abort
// marker, and a read_committed reader is never given its records, nor
// anything that says it has passed them; one that waits to read a record at
// the last stable offset, when that transaction ends the partition, waits
// for ever. Records of a transaction with no marker by the end of the read
// (aborted so, or still open) are not passed on: their transaction is not
// committed when List looks.
type committed struct {
	open map[int64][]*kgo.Record // by producer id, a transaction's records so far
}

// take passes r on to apply, or keeps it until its transaction's marker.
// It needs the partition's records in offset order, control records
// included (kgo.KeepControlRecords).
func (c *committed) take(r *kgo.Record, apply func(*kgo.Record)) {
	switch {
	case r.Attrs.IsControl():
		var key kmsg.ControlRecordKey
		if key.ReadFrom(r.Key) == nil && key.Type == kmsg.ControlRecordKeyTypeCommit {
			for _, tr := range c.open[r.ProducerID] {
				apply(tr)
			}
		}
		delete(c.open, r.ProducerID)
	case r.Attrs.IsTransactional():
		if c.open == nil {
			c.open = map[int64][]*kgo.Record{}
		}
		c.open[r.ProducerID] = append(c.open[r.ProducerID], r)
	default:
		apply(r)
	}
}
