package forwarder

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pollLoop is the one goroutine that polls a client: it hands each fetch to
// the worker of its topic (take), which queues it and wakes, then lets a
// rebalance held back by the poll go on. The workers never poll: each waits
// on its own timer and wake-ups (wake.go), so a level of 1s never waits on
// another stage's fetch, and the poll waits for records only.
//
// With BlockRebalanceOnPoll, a rebalance callback runs only once every
// polled record has been handed on (AllowRebalance after take), and a poll
// waits while a callback runs: a callback never races a partition being
// filled. It may race a worker's cycle, which the callbacks keep out of the
// partitions they take away (markLeaving).
type pollLoop struct {
	cl      *stageClient
	log     *slog.Logger
	workers map[string]*worker // by source topic, fixed for the client's life
	readers map[string]Reader  // by topic, fixed for the client's life
	unknown map[string]bool    // topics fetched with no worker, logged once
	burst   int64              // bytes of records a poll brings for the next not to wait (pollBurst)
	brought int64              // bytes of records the last poll brought
}

func newPollLoop(cl *stageClient, log *slog.Logger, workers map[string]*worker, readers map[string]Reader, burst int64) *pollLoop {
	return &pollLoop{cl: cl, log: log, workers: workers, readers: readers, unknown: map[string]bool{}, burst: burst}
}

// run polls until ctx ends or the group fences this member. A poll that
// brought less than burst waits until pollPace after the last one.
func (l *pollLoop) run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var last time.Time
	for ctx.Err() == nil {
		if wait := pollPace - time.Since(last); wait > 0 && l.brought < l.burst {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
			}
		}
		if err := l.pollOnce(ctx); err != nil {
			return err
		}
		last = time.Now()
	}
	return nil
}

// pollPace is the least time from one poll's return to the next poll, after
// a poll that brought little. The client sends a broker its next fetch only
// once the last one was polled, so this bounds fetches too: 500 a second a
// broker at most. Without it, a steady stream of records had the client
// fetch again the moment anything arrived: at 1,000 records/s, 900 fetches
// a second, each built over every partition kdelay reads (114 with the
// default levels) and bringing one or two records. With it, serve spends
// 39% of a core rather than 58% at 5,000/s on the embedded broker, 44%
// rather than 60% at 10,000/s, with lateness as close to the machine's
// floor (docs/BENCHMARKS.md, "Fetches at a steady rate"). What it costs is
// a record that is due less than pollPace after it is written, and arrives
// within pollPace of a poll: it is that much late at most. A level's
// records are fetched ahead of their time (resumeLead), a remainder waits
// in memory, and a record after a quiet spell finds the loop waiting in a
// poll already. A poll that brought a quarter of what a fetch may bring
// (pollBurst) is a burst, and the next poll goes at once: there the pace
// would only slow the burst, most where fetches are small (a small
// max-buffered-bytes).
const pollPace = 2 * time.Millisecond

// pollBurst is what a poll of cl must bring for the next one not to wait: a
// quarter of what its fetch from a broker may bring.
func pollBurst(cl *kgo.Client) int64 {
	n, _ := cl.OptValue(kgo.FetchMaxBytes).(int32)
	return int64(n) / 4
}

// pollOnce waits for a fetch, hands it on and allows a rebalance, within
// the client's gate (poll_gate.go): a transaction's End or Begin waits until
// it returns, and cancels the wait for records.
func (l *pollLoop) pollOnce(ctx context.Context) error {
	l.cl.hold.wait(ctx)
	pctx, leave := l.cl.gate.enter(ctx)
	defer leave()
	fetches := l.cl.poll(pctx)
	// Even after an error: a poll ended by its context has joined the
	// pollers that hold a rebalance back.
	defer l.cl.allowRebalance()
	if fetches.IsClientClosed() && ctx.Err() == nil {
		return errors.New("kafka client closed")
	}
	var fenced, refused error
	fetches.EachError(func(topic string, p int32, err error) {
		switch {
		case isFenced(err):
			fenced = err
		case errors.Is(err, kerr.InvalidSessionTimeout):
			refused = err
		case !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
			l.log.Warn("fetch_failed", "partition", p, "err", err)
		}
	})
	if fenced != nil || refused != nil {
		// One group per client: any of its workers names it.
		for _, w := range l.workers {
			if fenced != nil {
				return w.fenced(fenced)
			}
			return w.sessionRefused(refused)
		}
	}
	l.hand(fetches)
	return nil
}

// hand gives each worker the partitions of its source in fetches, and each
// reader those of its topic.
func (l *pollLoop) hand(fetches kgo.Fetches) {
	byTopic := map[string][]kgo.FetchTopicPartition{}
	l.brought = 0
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if len(fp.Records) > 0 {
			byTopic[fp.Topic] = append(byTopic[fp.Topic], fp)
		}
		// Counted only up to burst: past it, the next poll goes at once
		// whatever else this one brought.
		for _, r := range fp.Records {
			if l.brought >= l.burst {
				break
			}
			l.brought += recordSize(r) - recordOverhead
		}
	})
	for topic, fps := range byTopic {
		if r, ok := l.readers[topic]; ok {
			r.Take(fps)
			continue
		}
		w, ok := l.workers[topic]
		if !ok {
			if !l.unknown[topic] {
				// A bug: the client consumes only its workers' sources.
				l.log.Error("fetched_topic_without_worker", "fetched", topic)
				l.unknown[topic] = true
			}
			continue
		}
		w.take(fps)
	}
}
