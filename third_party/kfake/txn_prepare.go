package kfake

import "slices"

// kdelay patch: a transaction's commit survives a crash in the middle.
//
// endTx writes a commit marker to each partition of the transaction, one
// after another, then the staged offsets to groups.log. A process killed
// between two of those writes left some partitions committed, the others
// aborted by the segment replay on the next start (no marker), and the
// offsets not moved: a consume-transform-produce client re-reads its input
// and produces again what the committed partitions already hold, so a
// read_committed consumer sees it twice.
//
// Kafka's coordinator writes PrepareCommit to __transaction_state before
// any marker and completes a prepared transaction when it loads. This does
// the same with pids.log: a "prepare" entry naming the partitions and the
// offsets is written before the markers, "endtx" after the offsets; on
// load, a prepare without its endtx is finished: the missing markers
// written, the offsets applied.

// crashAbort is a transaction the segment replay aborted because its
// partition holds no marker for it.
type crashAbort struct {
	pd *partData
	a  abortedTxnEntry
}

// prepareEntry is the commit point of pidinf's open transaction.
func (pidinf *pidinfo) prepareEntry() pidLogEntry {
	commit := true
	e := pidLogEntry{Type: "prepare", PID: pidinf.id, Epoch: pidinf.epoch, Commit: &commit, Parts: map[string][]int32{}}
	pidinf.txParts.each(func(t string, p int32, _ *partData) {
		e.Parts[t] = append(e.Parts[t], p)
	})
	for _, group := range pidinf.txGroups {
		offsets := pidinf.txOffsets[group]
		if len(offsets) == 0 {
			continue
		}
		if e.Offsets == nil {
			e.Offsets = map[string]map[string]map[int32]sessionTxStagedOffsetCommit{}
		}
		topics := map[string]map[int32]sessionTxStagedOffsetCommit{}
		offsets.each(func(t string, p int32, oc *offsetCommit) {
			if topics[t] == nil {
				topics[t] = map[int32]sessionTxStagedOffsetCommit{}
			}
			topics[t][p] = sessionTxStagedOffsetCommit{Offset: oc.offset, LeaderEpoch: oc.leaderEpoch, Metadata: oc.metadata}
		})
		e.Offsets[group] = topics
	}
	return e
}

// finishPreparedCommits completes the commits that pids.log prepared and
// did not end, once partitions, PIDs and groups are loaded.
func (c *Cluster) finishPreparedCommits() {
	for _, e := range c.prepared {
		for t, parts := range e.Parts {
			for _, p := range parts {
				pd, ok := c.data.tps.getp(t, p)
				if ok && c.undoCrashAbort(pd, e.PID) {
					b, nbytes := txnMarkerBatch(e.PID, e.Epoch, true, 0)
					c.pushBatch(pd, nbytes, b, false)
					pd.recalculateLSO()
				}
			}
		}
		for group, topics := range e.Offsets {
			g, _ := c.groups.newOrExisting(group)
			for t, parts := range topics {
				for p, s := range parts {
					g.commitAndPersist(t, p, offsetCommit{offset: s.Offset, leaderEpoch: s.LeaderEpoch, metadata: s.Metadata})
				}
			}
		}
		if pidinf := c.pids.ids[e.PID]; pidinf != nil {
			pidinf.lastWasCommit = true
		}
		c.cfg.logger.Logf(LogLevelInfo, "finished the commit of pid %d epoch %d, prepared before a crash", e.PID, e.Epoch)
		c.persistPIDEntry(pidLogEntry{Type: "endtx", PID: e.PID, Epoch: e.Epoch, Commit: e.Commit})
	}
	c.prepared, c.crashAborts = nil, nil
}

// undoCrashAbort removes the abort the segment replay gave pid's open
// transaction in pd, and says whether there was one: without, pd holds
// the transaction's marker already (or none of its records).
func (c *Cluster) undoCrashAbort(pd *partData, pid int64) bool {
	i := slices.IndexFunc(c.crashAborts, func(ca crashAbort) bool { return ca.pd == pd && ca.a.producerID == pid })
	if i < 0 {
		return false
	}
	a := c.crashAborts[i].a
	pd.abortedTxns = slices.DeleteFunc(pd.abortedTxns, func(e abortedTxnEntry) bool { return e == a })
	return true
}
