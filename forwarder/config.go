package forwarder

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/levels"
	"github.com/kdelay/kdelay/stages"
)

// Mode chooses how a level forwarder watches the heads of its partitions.
type Mode string

const (
	// ModeExact pauses a partition whose head is not due and wakes exactly
	// when it is, or when a new record arrives.
	ModeExact Mode = "exact"

	// ModePoll behaves like RocketMQ's delay levels: it looks at every head
	// each CheckInterval and does nothing in between. It exists so that the
	// benchmark can compare the two designs on the same broker.
	ModePoll Mode = "poll"
)

// Delivery chooses what a consumer of kdelay's topics may see after a crash.
type Delivery string

const (
	// AtLeastOnce produces a record, waits for the broker's acknowledgement,
	// then commits the offset it came from: a crash re-delivers what was
	// handed on since the last commit, and consumers dedupe by kdelay-id.
	AtLeastOnce Delivery = "at-least-once"

	// ExactlyOnce produces records and commits the offsets they came from in
	// Kafka transactions, so a consumer reading with
	// isolation.level=read_committed sees each record once, across crashes
	// and broker restarts. A delivered record becomes visible to such a
	// consumer when its transaction commits: CommitLinger after the
	// transaction's first record, and the commit, later than at-least-once
	// would show it. See txn.go.
	ExactlyOnce Delivery = "exactly-once"
)

// Defaults of Config, exported so that kdelay's command line offers the same
// ones as the library: a default written in two places drifts. The topic
// prefix and the longest delay are the wire contract's, kdelay.DefaultPrefix
// and kdelay.DefaultMaxDelay; the levels are levels.Default().
const (
	// DefaultGroup prefixes the consumer groups.
	DefaultGroup = "kdelay"

	// DefaultMode wakes each level exactly when its head is due.
	DefaultMode = ModeExact

	// DefaultDelivery is at-least-once: records are visible on their target
	// the moment they are produced, and any consumer may read them.
	DefaultDelivery = AtLeastOnce

	// DefaultCheckInterval is poll mode's tick, which its records can be
	// late by. Exact mode does not tick: it wakes when a head is due or a
	// record arrives.
	DefaultCheckInterval = 100 * time.Millisecond

	// DefaultFetchMaxWait is how long a fetch with nothing new waits at
	// the broker. One client fetches for every stage (at-least-once), one
	// request a broker at a time: a partition resumed while a fetch is in
	// flight waits for it, and when only idle partitions are in it (a full
	// stage paused its own) that is this long, at every refill of a full
	// buffer. A stage full of records on their way to the broker holds the
	// client's poll instead of pausing (pollHold), so this is paid only by
	// a stage full of records held for their time. At 5s, franz-go's default and kdelay's while each stage had
	// a client and paused its whole topic instead (pauseIdle), a burst
	// through a full buffer moved half as fast (TestFullBufferBurst); at
	// 250ms, records held for their time through a small buffer fell
	// behind, 1.5s late on Apache Kafka, and 107ms at 100ms
	// (TestFullBufferOfHeldRecords). It is the wait while a stage may need
	// a fetch at once; otherwise fetches wait IdleFetchMaxWait
	// (fetch_wait.go), since a fetch a broker per 100ms cost an idle kdelay
	// 1.44% of a core on three brokers.
	DefaultFetchMaxWait = 100 * time.Millisecond

	// DefaultIdleFetchMaxWait is how long a fetch with nothing new waits at
	// the broker while no stage may need one at once (fetch_wait.go):
	// franz-go's default. An idle kdelay then sends a fetch a broker per 5s,
	// not per 100ms: on a 3-node cluster 0.27% of a core against 1.44%.
	DefaultIdleFetchMaxWait = 5 * time.Second

	// DefaultMaxBufferedBytes bounds the records a whole Forwarder holds in
	// memory to 64 MiB, so that kdelay serve fits a small container (128 MiB
	// with the Go runtime and the client's own buffers) whatever the size of
	// a burst. Each forwarder reserves an equal part of half of it, 1.7 MiB
	// with the default 18 levels, and a forwarder moving records that are
	// due borrows from a quarter, 16 MiB, so that it fetches while it
	// produces; the last quarter is headroom for the garbage collector
	// (pool.go; docs/BENCHMARKS.md, "Throughput").
	DefaultMaxBufferedBytes int64 = 64 << 20

	// DefaultDeliveryTimeout rides out a broker restart or a leader
	// election, which take seconds to a minute, without dead-lettering the
	// records caught in it; longer than Kafka's delivery.timeout.ms (2m)
	// because a dead letter costs a person a replay.
	DefaultDeliveryTimeout = 5 * time.Minute

	// DefaultCommitInterval bounds the work a crash repeats to one second's.
	DefaultCommitInterval = time.Second

	// DefaultCommitLinger lets an exactly-once transaction take what a
	// busy forwarder produces over 10ms, and adds no more to a delivery.
	DefaultCommitLinger = 10 * time.Millisecond

	// DefaultSessionTimeout is how long a kdelay that died for good holds
	// its partitions: their records are late by up to this much plus a
	// rebalance of a few seconds. Kafka's own default (45s, KIP-735) suits
	// a batch consumer, for which a rebalance costs more than lateness;
	// for a delay system lateness is the product. 10s still rides out a
	// long GC pause or a network blip of a few seconds without moving
	// partitions, and a crash that comes back (systemd, Kubernetes) does
	// not wait for it at all: see InstanceID. The broker bounds it from
	// below by group.min.session.timeout.ms, 6s by default.
	DefaultSessionTimeout = 10 * time.Second

	// DefaultStuckAfter is longer than a broker's failover (about 10-20s
	// measured on a 3-node cluster) and the backoff of a produce retried
	// through it, so that a forwarder waiting out the cluster is not
	// called stuck; short enough that a readiness probe notices one in
	// minutes.
	DefaultStuckAfter = time.Minute

	// DefaultShutdownTimeout bounds a stop or a revoke.
	DefaultShutdownTimeout = 10 * time.Second

	// DefaultPartitions is the partition count of created topics: the most
	// kdelay processes that can share one level.
	DefaultPartitions int32 = 6

	// DefaultReplicationFactor uses the broker's default.replication.factor.
	DefaultReplicationFactor int16 = -1

	// DefaultRetention keeps records for 7 days, Kafka's default
	// retention.ms: far more than the largest default level plus headroom.
	DefaultRetention = 7 * 24 * time.Hour

	// DefaultRetentionHeadroom lets kdelay be down an hour without a level
	// topic deleting records that still wait in it.
	DefaultRetentionHeadroom = time.Hour
)

// Config configures a Forwarder. The zero value of every field but Brokers
// is replaced by its default in WithDefaults.
type Config struct {
	// Brokers are the seed brokers. Required.
	Brokers []string

	// Topics names kdelay's topics. Default prefix kdelay.DefaultPrefix,
	// "kdelay".
	Topics kdelay.Topics

	// Levels are the delay levels. Default levels.Default(), 1s to 2h.
	Levels levels.Set

	// Group is the consumer group every stage of a process is read with, in
	// either delivery. Every kdelay process that shares it shares the work.
	// Default DefaultGroup, "kdelay".
	Group string

	// Mode is ModeExact or ModePoll. Default DefaultMode, ModeExact.
	Mode Mode

	// Delivery is AtLeastOnce or ExactlyOnce. Default DefaultDelivery,
	// AtLeastOnce.
	Delivery Delivery

	// CheckInterval is the tick of ModePoll. ModeExact wakes when a head is
	// due or a record arrives, and uses it only as a margin: a paused
	// partition resumes FetchMaxWait plus CheckInterval before its buffered
	// records run out, and a commit held back by the one in flight is tried
	// again this often. Default DefaultCheckInterval, 100ms.
	CheckInterval time.Duration

	// FetchMaxWait bounds how long a fetch waits for new records. A
	// partition resumed while a fetch is in flight is fetched after it ends,
	// so a paused partition is resumed this long (plus CheckInterval) before
	// its last buffered record is due, unless memory is pressed (see
	// MaxBufferedBytes). Default DefaultFetchMaxWait, 100ms.
	FetchMaxWait time.Duration

	// IdleFetchMaxWait is how long a fetch waits for new records while no
	// stage may need a fetch at once: no paused partition resumes within
	// it, no full share has records on their way, may borrow, or holds one
	// due within it, no reader has asked, and no records came within the
	// last 250ms. The wait turns back to FetchMaxWait that long ahead
	// of a need, since a fetch in flight keeps the wait it was sent with.
	// Not below FetchMaxWait; equal to it, the wait never changes. Default
	// DefaultIdleFetchMaxWait, 5s, or FetchMaxWait if that is longer.
	IdleFetchMaxWait time.Duration

	// MaxBufferedBytes bounds the records the Forwarder holds in memory:
	// fetched and not yet handed on, or handed on and not yet acknowledged
	// by the broker. Each record counts its key, value and headers plus what
	// kdelay and the client keep for it (about 640 bytes). Half of it is
	// reserved in equal parts by the ingress and each level forwarder, so a
	// burst in one never keeps another from fetching; a quarter is a pool
	// that a forwarder borrows from for records due within the smallest
	// level, while what it holds for later (due after that, or being
	// retried) fits in its reserve, and gives back as the broker
	// acknowledges them; half of what the reserves leave unused is lent
	// beside it, and the last quarter is filled only while a forwarder
	// whose reserve was lent fills it. While more than half the pool is lent, a
	// paused partition of a forwarder that borrows resumes 250ms, not
	// FetchMaxWait, before its last buffered record is due, so
	// memory goes to the records due soonest. A forwarder that may hold no
	// more stops fetching until half its reserve is free again, or the pool
	// has room for one of its fetches, and may exceed what it was allowed
	// by one fetch per partition. A burst larger than that is delivered at
	// the pace of the broker's acknowledgements,
	// and its last records leave later than they would if it were all in
	// memory. It covers SharedBytes too. Default DefaultMaxBufferedBytes,
	// 64 MiB.
	MaxBufferedBytes int64

	// SharedBytes, if set, reports memory the process holds beside the
	// Forwarder that MaxBufferedBytes covers too: kdelay serve's scheduler
	// index (schedule.Scheduler.IndexBytes). The reserves and the pool
	// shrink in proportion to it, records keeping at least 256 KiB a
	// forwarder. Every forwarder calls it on each turn of its loop: it must
	// be cheap and safe to call concurrently. Default nil: nothing beside.
	SharedBytes func() int64

	// MaxDelay is the longest delay accepted; longer ones are dead-lettered.
	// Default kdelay.DefaultMaxDelay, 400 days.
	MaxDelay time.Duration

	// DeliveryTimeout is how long a record may keep failing to be produced
	// to its next topic with an error worth retrying (a partition without a
	// leader, too few in-sync replicas) before it goes to the DLQ with the
	// last error. It counts from the first try; the last try may end a few
	// seconds after it. The records behind keep moving meanwhile, but the
	// record holds its partition's commit point, so a crash re-delivers what
	// came after it. Default DefaultDeliveryTimeout, 5m.
	DeliveryTimeout time.Duration

	// StuckAfter is how long a forwarder may hold a record past its due
	// time while handing none on (at least once: no produce acknowledged;
	// exactly once: no transaction committed) before it counts as stuck:
	// LevelState.Stuck says why, and the admin listener's /readyz answers
	// 503. A backlog that moves is late, not stuck. Default
	// DefaultStuckAfter, 1m.
	StuckAfter time.Duration

	// CommitInterval is how often handed-on offsets are committed. A crash
	// re-delivers at most this much work. Default DefaultCommitInterval, 1s.
	CommitInterval time.Duration

	// CommitLinger is, in exactly-once delivery, how long after its first
	// record a transaction begins to commit, taking the records that follow
	// it; records still join it until what it held by then is acknowledged
	// (txnLoop.landEarlier). A read_committed consumer sees a record when
	// its transaction commits, so this and the commit are what exactly-once
	// adds to a delivery's lateness; a shorter linger ends more
	// transactions, each a few requests to the transaction coordinator. A
	// transaction ends CommitInterval after the last one if that is sooner.
	// At-least-once commits every CommitInterval and ignores it. Default
	// DefaultCommitLinger, 10ms.
	CommitLinger time.Duration

	// SessionTimeout is how long a consumer group waits for a member that
	// stopped answering (a crashed or frozen kdelay) before handing its
	// partitions to the others; their records wait that long. A kdelay
	// that restarts with the same InstanceID takes its partitions back
	// without waiting for it. The broker bounds it
	// (group.min.session.timeout.ms, 6s by default, and
	// group.max.session.timeout.ms, 30m). Default DefaultSessionTimeout,
	// 10s.
	SessionTimeout time.Duration

	// InstanceID names this process in every consumer group it joins
	// (Kafka's static membership, group.instance.id): a kdelay that crashes
	// and restarts with the same id gets its partitions back as soon as it
	// rejoins, instead of after SessionTimeout, and without moving anyone
	// else's. It must be stable across restarts and unique among the
	// processes that share Group: two processes with the same id fence each
	// other, and the one fenced stops with an error. A clean stop leaves
	// the groups, so that its partitions move at once. Default
	// DefaultInstanceID(): the host name, which is the pod name in
	// Kubernetes; processes sharing a host must each set their own.
	InstanceID string

	// TransactionalIDSuffix is added to every transactional id this process
	// uses in exactly-once delivery (InstanceID + "." + group + suffix).
	// Empty, the ids are the same across restarts, so that a process that
	// comes back fences its dead predecessor and aborts, with markers, the
	// transactions it left open. `kdelay serve` sets one of its own start
	// when it runs the embedded broker, which aborts them as it loads but
	// writes no marker: a consumer reading a producer's records after such
	// an abort takes them as aborted until it reads one, so the restarted
	// process must not write under the same producer id.
	TransactionalIDSuffix string

	// ShutdownTimeout bounds how long shutdown and a revoke wait for
	// in-flight produces. Default DefaultShutdownTimeout, 10s.
	ShutdownTimeout time.Duration

	// Partitions is the partition count of the topics kdelay creates.
	// Default DefaultPartitions, 6.
	Partitions int32

	// ReplicationFactor of the topics kdelay creates; -1 uses the broker's
	// default.replication.factor. Default DefaultReplicationFactor, -1.
	ReplicationFactor int16

	// Retention is retention.ms of the topics kdelay creates. It must exceed
	// the largest level by at least RetentionHeadroom. Default
	// DefaultRetention, 7 days.
	Retention time.Duration

	// RetentionHeadroom is how much longer than its level an existing level
	// topic must keep records, so that records survive kdelay being down
	// that long. Default DefaultRetentionHeadroom, 1h.
	RetentionHeadroom time.Duration

	// ClientOpts are added to every Kafka client kdelay makes: TLS, SASL,
	// a dialer, a logger.
	ClientOpts []kgo.Opt

	// Client, when set, is the client outside any group that Run asks the
	// brokers with and reads the control topic with: one made by
	// NewPlainClient, which the process may share with what it runs
	// beside the forwarder (kdelay serve: the admin listener, the
	// console). Run does not close it. Default: Run makes one and closes
	// it when it returns.
	Client *kgo.Client

	// Readers read topics of their own on the forwarders' client, in
	// Group (Reader). Default: none.
	Readers []Reader

	// Observer is told what every forwarder does, record by record (see
	// Observer); package admin's Metrics is one. Default: none.
	Observer Observer

	// Logger receives kdelay's logs. Default: discard.
	Logger *slog.Logger

	// NowFunc returns the current time. Default time.Now.
	NowFunc func() time.Time

	// freeMemory collects garbage and returns free memory to the operating
	// system once forwarders drained a burst (memory.go); tests count its
	// calls. Default debug.FreeOSMemory.
	freeMemory func()
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.Topics.Prefix = cmp.Or(c.Topics.Prefix, kdelay.DefaultPrefix)
	if len(c.Levels) == 0 {
		c.Levels = levels.Default()
	}
	c.Group = cmp.Or(c.Group, DefaultGroup)
	c.Mode = cmp.Or(c.Mode, DefaultMode)
	c.Delivery = cmp.Or(c.Delivery, DefaultDelivery)
	c.CheckInterval = cmp.Or(c.CheckInterval, DefaultCheckInterval)
	c.FetchMaxWait = cmp.Or(c.FetchMaxWait, DefaultFetchMaxWait)
	c.IdleFetchMaxWait = cmp.Or(c.IdleFetchMaxWait, max(DefaultIdleFetchMaxWait, c.FetchMaxWait))
	c.MaxBufferedBytes = cmp.Or(c.MaxBufferedBytes, DefaultMaxBufferedBytes)
	c.MaxDelay = cmp.Or(c.MaxDelay, kdelay.DefaultMaxDelay)
	c.DeliveryTimeout = cmp.Or(c.DeliveryTimeout, DefaultDeliveryTimeout)
	c.CommitInterval = cmp.Or(c.CommitInterval, DefaultCommitInterval)
	c.CommitLinger = cmp.Or(c.CommitLinger, DefaultCommitLinger)
	c.StuckAfter = cmp.Or(c.StuckAfter, DefaultStuckAfter)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.InstanceID = cmp.Or(c.InstanceID, DefaultInstanceID())
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.Partitions = cmp.Or(c.Partitions, DefaultPartitions)
	c.ReplicationFactor = cmp.Or(c.ReplicationFactor, DefaultReplicationFactor)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.RetentionHeadroom = cmp.Or(c.RetentionHeadroom, DefaultRetentionHeadroom)
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.freeMemory == nil {
		c.freeMemory = debug.FreeOSMemory
	}
	return c
}

// validate reports every problem of c in the order of kdelay's settings
// (kdelay serve --help), so that the same mistakes read the same every time.
func (c Config) validate() error {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	negative := func(key string, d, def time.Duration) {
		if d < 0 {
			fail(key, "%s is negative; use a positive duration, or 0 for the default %s", d, def)
		}
	}
	if len(c.Brokers) == 0 {
		fail("brokers", "no seed brokers; list at least one host:port")
	}
	if c.Partitions < 1 {
		fail("partitions", "%d; use at least 1", c.Partitions)
	}
	if need := c.Levels.Largest().Delay + c.RetentionHeadroom; c.Retention < need {
		fail("retention", "%s is shorter than the largest level %s plus %s of headroom; use at least %s",
			c.Retention, c.Levels.Largest().Name, c.RetentionHeadroom, need)
	}
	negative("retention-headroom", c.RetentionHeadroom, DefaultRetentionHeadroom)
	if c.Mode != ModeExact && c.Mode != ModePoll {
		fail("mode", "%q is not a mode; use %q or %q", c.Mode, ModeExact, ModePoll)
	}
	if c.Delivery != AtLeastOnce && c.Delivery != ExactlyOnce {
		fail("delivery", "%q is not a delivery; use %q or %q", c.Delivery, AtLeastOnce, ExactlyOnce)
	}
	for i, r := range c.Readers {
		topic := r.Topic()
		switch {
		case topic == "":
			fail("readers", "reader %d names no topic", i)
		case slices.ContainsFunc(c.stages(), func(s stage) bool { return s.topic == topic }):
			fail("readers", "reader %d reads %s, which a forwarder reads; give it a topic of its own", i, topic)
		case slices.ContainsFunc(c.Readers[:i], func(o Reader) bool { return o.Topic() == topic }):
			fail("readers", "readers %d and another both read %s; give each a topic of its own", i, topic)
		}
	}
	negative("check-interval", c.CheckInterval, DefaultCheckInterval)
	negative("fetch-max-wait", c.FetchMaxWait, DefaultFetchMaxWait)
	negative("idle-fetch-max-wait", c.IdleFetchMaxWait, DefaultIdleFetchMaxWait)
	if c.IdleFetchMaxWait >= 0 && c.IdleFetchMaxWait < c.FetchMaxWait {
		fail("idle-fetch-max-wait", "%s is shorter than fetch-max-wait %s; make it at least that (equal keeps every fetch's wait at fetch-max-wait), or 0 for the default %s",
			c.IdleFetchMaxWait, c.FetchMaxWait, DefaultIdleFetchMaxWait)
	}
	if forwarders := int64(len(c.stages())); c.MaxBufferedBytes < forwarders*minBufferShare {
		fail("max-buffered-bytes", "%d leaves each of the %d forwarders (the ingress and one per level) less than %d bytes; use at least %d, or 0 for the default %d",
			c.MaxBufferedBytes, forwarders, minBufferShare, forwarders*minBufferShare, DefaultMaxBufferedBytes)
	}
	if c.MaxDelay < c.Levels.Smallest().Delay {
		fail("max-delay", "%s is below the smallest level %s; raise it", c.MaxDelay, c.Levels.Smallest().Name)
	}
	negative("delivery-timeout", c.DeliveryTimeout, DefaultDeliveryTimeout)
	negative("commit-interval", c.CommitInterval, DefaultCommitInterval)
	negative("commit-linger", c.CommitLinger, DefaultCommitLinger)
	negative("stuck-after", c.StuckAfter, DefaultStuckAfter)
	negative("session-timeout", c.SessionTimeout, DefaultSessionTimeout)
	if c.InstanceID == "" {
		fail("instance-id", "the host has no name to default to; set one that is unique among the kdelay processes sharing the group and stays the same across restarts")
	}
	negative("shutdown-timeout", c.ShutdownTimeout, DefaultShutdownTimeout)
	if err := checkPlainClient(c.Client); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// minBufferShare is the least a forwarder may hold: a quarter of it is one
// fetch, and smaller fetches would cost more round trips than records.
const minBufferShare = 256 << 10

// maxBufferedRecords is the client's limit on records buffered for
// produce, a backstop the buffers cannot reach: every record held counts at
// least recordOverhead against MaxBufferedBytes, and four times as many fit
// below it. franz-go allocates nothing for the limit up front.
func (c *Config) maxBufferedRecords() int {
	return int(4 * c.MaxBufferedBytes / recordOverhead)
}

// bufferShare is each forwarder's share of MaxBufferedBytes.
func (c *Config) bufferShare() int64 { return c.MaxBufferedBytes / int64(len(c.stages())) }

// bufferReserve is what each forwarder may always hold: half its share. The
// other halves make the pool forwarders borrow from (pool.go).
func (c *Config) bufferReserve() int64 { return c.bufferShare() / 2 }

// fetchMaxBytes is how many bytes one fetch asks for: a quarter of a
// forwarder's share, because a record held counts its bookkeeping too, which
// for records of a hundred bytes is three times their size on the wire. A
// fetch that pushes the buffer over its share is thus about the size of the
// share, whatever the records. It never exceeds franz-go's default of 50
// MiB, which the client's limit on a broker's reply (100 MiB) must exceed.
func (c *Config) fetchMaxBytes() int32 {
	return int32(min(c.bufferShare()/4, 50<<20))
}

type stage struct {
	level string // the level's name, IngressLevel for the ingress
	topic string
	group string // suffix of Config.Group
	wait  time.Duration
}

// stages are the topics forwarded: the ingress, then each level.
func (c *Config) stages() []stage {
	var s []stage
	for _, v := range c.view().Configured() {
		s = append(s, c.stage(v))
	}
	return s
}

// view names the stages as Kafka shows them: package stages holds the list
// and the group names, which kdelay status and the pending gauge read too.
func (c *Config) view() stages.Config {
	return stages.Config{Topics: c.Topics, Group: c.Group, Levels: c.Levels}
}

// stage is what a worker needs of v: its group as a suffix of Config.Group.
func (c *Config) stage(v stages.Stage) stage {
	return stage{level: v.Name, topic: v.Topic, group: strings.TrimPrefix(v.Group, c.Group), wait: v.Wait}
}

// commandTTL is how long a command is kept after it was written: every
// record pending then leaves its level within the largest level, and
// RetentionHeadroom covers kdelay being stopped or behind, as it does for the
// level topics' retention.
func (c *Config) commandTTL() time.Duration {
	return c.Levels.Largest().Delay + c.RetentionHeadroom
}

// ownTopics are every topic kdelay reads or writes besides targets.
func (c *Config) ownTopics() []string {
	topics := []string{c.Topics.DLQ(), c.Topics.Control()}
	for _, s := range c.stages() {
		topics = append(topics, s.topic)
	}
	return topics
}

// levelWait returns how long a record waits in topic if it is one of the
// configured levels.
func (c *Config) levelWait(topic string) (time.Duration, bool) {
	for _, s := range c.stages() {
		if s.topic == topic && s.wait > 0 {
			return s.wait, true
		}
	}
	return 0, false
}
