package forwarder

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FailoverOpts are the client options that have a client find a broker's
// work again soon after another broker took it over: the forwarders' and
// the scheduler's clients use them. Both cost nothing while the cluster is
// healthy; while a broker is down, each client sends at most a request or
// two a second more, as the Java client may (retry.backoff.ms to
// retry.backoff.max.ms, 100 ms to 1 s). What they do for a node's death is
// measured in docs/RELIABILITY.md.
//
// Metadata: a client may reload it metadataMinAge after its last load,
// rather than franz-go's 5 s, once an error says a partition moved. When a
// broker dies, its partitions get new leaders once the controller fences it,
// and a client that learns of that up to 5 s later holds every record for
// those partitions as long; in exactly-once, a transaction cannot end while
// one of its records waits, nor can the next one begin (the broker answers
// CONCURRENT_TRANSACTIONS until the last one's markers are written).
//
// Retries: franz-go backs off up to 5 s between a request's tries, so a
// request that failed through a fencing's 9 s tries again up to 5 s after
// the new broker serves. Every exactly-once commit forces a heartbeat after
// its offsets, and the heartbeat loop takes it only between its own tries:
// with the group's coordinator dead, the commit after the failover waited
// out the heartbeat's backoff (traced: 2.6 s).
//
// A request tries until its retry timeout (franz-go's, or
// GroupRetryTimeout's for the group's requests), not until franz-go's 20
// tries: at the shorter backoff those ran out after about 17 s, and a
// member whose coordinator was away longer gave its session up and joined
// again as a new one (TestHeartbeatTriesForTheGroupRetryTimeout).
func FailoverOpts() []kgo.Opt {
	return []kgo.Opt{kgo.MetadataMinAge(metadataMinAge), kgo.RetryBackoffFn(retryBackoff), kgo.RequestRetries(math.MaxInt32)}
}

// metadataMinAge is how soon a client may reload metadata after its last
// load.
const metadataMinAge = 500 * time.Millisecond

// retryBackoff is the Java client's backoff (KIP-580): 100 ms doubling to
// 1 s, each ±20%.
func retryBackoff(tries int) time.Duration {
	const first, most = 100 * time.Millisecond, time.Second
	backoff := most
	if tries < 10 {
		backoff = min(first<<max(tries-1, 0), most)
	}
	return time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
}
