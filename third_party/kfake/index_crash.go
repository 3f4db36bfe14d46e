package kfake

import (
	"io"
	"os"
	"path/filepath"
)

// kdelay patch: a crash between a batch's segment write and its index
// entry's. The load read such a batch as not transactional, so a record of
// a transaction that never committed was served as committed; and every
// batch appended after the restart was read with an earlier one's entry.
// loadSegmentBatches now takes a missing entry from the batch's header, and
// completeIndex writes it.

// completeIndex writes the index entries a crash lost after their batches
// reached the segment (kdelay patch). The index is read by position: without
// them, every batch appended later would be read with an earlier batch's
// entry.
func (c *Cluster) completeIndex(pd *partData, fsys fs, pdir string, base int64, idxRaw []byte, batches []*partBatch) {
	have := len(idxRaw) / indexEntrySize
	if have >= len(batches) {
		return
	}
	f, err := fsys.OpenFile(filepath.Join(pdir, indexFileName(base)), os.O_WRONLY, 0o644)
	if err != nil {
		c.cfg.logger.Logf(LogLevelWarn, "partition %s-%d segment %d: open index to complete: %v", pd.t, pd.p, base, err)
		return
	}
	defer f.Close()
	var buf []byte
	for _, b := range batches[have:] {
		e := encodeIndexEntry(b.epoch, 0, b.inTx) // the timestamp is recomputed on load
		buf = append(buf, e[:]...)
	}
	if err := f.Truncate(int64(have * indexEntrySize)); err == nil {
		if _, err = f.Seek(int64(have*indexEntrySize), io.SeekStart); err == nil {
			_, err = f.Write(buf)
		}
	}
	if err != nil {
		c.cfg.logger.Logf(LogLevelWarn, "partition %s-%d segment %d: complete index: %v", pd.t, pd.p, base, err)
	}
}
