package forwarder

import "sync"

// inbox is what the client's produce callbacks, the background commit and
// the scan leave for the worker's loop. It has a lock of its own because
// they run on other goroutines while the loop holds worker.mu for a whole
// cycle: a callback that waited for mu would hold up the client's produce
// path for every stage behind one busy loop.
type inbox struct {
	mu         sync.Mutex
	acks       []ack
	spare      []ack // the loop's: the slice takeAcks gives acks next
	failed     bool  // an ack in acks is a failure
	acked      int64 // bytes of the successful acks in acks
	wakeAfter  int64 // the loop wants waking once acked reaches it; 0: never
	commitDone *commitResult
	found      []found // what the scan in flight found
	scanDone   bool    // the scan in flight ended
}

// putAck leaves a's outcome for the loop and reports whether the loop must
// wake for it: a failure, or enough bytes acknowledged to resume a full
// buffer (wakeAfter).
func (in *inbox) putAck(a ack) (wake bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.acks = append(in.acks, a)
	if a.err == nil {
		in.acked += a.e.size
	} else {
		in.failed = true
	}
	return a.err != nil || in.wakeAfter > 0 && in.acked >= in.wakeAfter
}

// takeAcks returns the acks left so far; the loop gives the slice back
// with returnAcks once it has applied them. The callbacks fill the other
// slice meanwhile: at full speed a cycle applies thousands of acks, and
// growing a new slice for each cycle cost a tenth of the loop.
func (in *inbox) takeAcks() []ack {
	in.mu.Lock()
	defer in.mu.Unlock()
	acks := in.acks
	in.acks, in.spare = in.spare, nil
	in.failed, in.acked = false, 0
	return acks
}

// returnAcks gives back the slice takeAcks returned, emptied. Only the loop
// touches spare.
func (in *inbox) returnAcks(acks []ack) {
	clear(acks)
	in.spare = acks[:0]
}

// due reports whether a failure or enough acknowledged bytes wait for the
// loop (see putAck).
func (in *inbox) due() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.failed || (in.wakeAfter > 0 && in.acked >= in.wakeAfter)
}

// setWakeAfter sets how many acknowledged bytes wake the loop.
func (in *inbox) setWakeAfter(n int64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.wakeAfter = n
}

// putCommit leaves the result of a background commit.
func (in *inbox) putCommit(res commitResult) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.commitDone = &res
}

// takeCommit returns the result of a finished background commit, nil if
// none.
func (in *inbox) takeCommit() *commitResult {
	in.mu.Lock()
	defer in.mu.Unlock()
	res := in.commitDone
	in.commitDone = nil
	return res
}

// putFound leaves what the scan in flight found as it ends.
func (in *inbox) putFound(fs []found) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.found, in.scanDone = append(in.found, fs...), true
}

// takeFound returns what the scans found so far, and whether the one in
// flight ended.
func (in *inbox) takeFound() (fs []found, done bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	fs, done = in.found, in.scanDone
	in.found, in.scanDone = nil, false
	return fs, done
}
