package schedule

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
)

// Defaults of Config.
const (
	// DefaultGroup is the forwarder's default group, so that one setting
	// names a fleet (Config.Group).
	DefaultGroup = "kdelay"

	// DefaultLookahead writes an occurrence a minute before it is due. It
	// then waits in a level like any delayed record and leaves at its time
	// with the forwarder's lateness, and a scheduler restarting or a
	// partition moving within that minute delays nothing.
	DefaultLookahead = time.Minute

	// DefaultBatch bounds the occurrences written in one transaction (or
	// one round of acknowledgements), so that a burst of schedules due at
	// once is written in steps that each end soon.
	DefaultBatch = 1000

	// DefaultSessionTimeout is the forwarder's: how long the schedules of
	// a process that died wait for another to take them, less what
	// Lookahead covers.
	DefaultSessionTimeout = 10 * time.Second

	// DefaultShutdownTimeout bounds a stop.
	DefaultShutdownTimeout = 10 * time.Second

	// DefaultPartitions of the schedules topic, when kdelay creates it: the
	// most processes that share the schedules.
	DefaultPartitions int32 = 6

	// DefaultReplicationFactor uses the broker's default.replication.factor.
	DefaultReplicationFactor int16 = -1
)

// Config configures a Scheduler. The zero value of every field but Brokers
// and InstanceID is replaced by its default in WithDefaults.
type Config struct {
	// Brokers are the seed brokers. Required.
	Brokers []string

	// Topics names kdelay's topics: the schedules topic read, the ingress
	// written. Default prefix kdelay.DefaultPrefix, "kdelay".
	Topics kdelay.Topics

	// Group names the consumer group that shares the schedules topic's
	// partitions, and so the schedules, among the processes: Group itself
	// AsReader (the forwarders'), "<group>.schedules" on a client of its
	// own. Default DefaultGroup, "kdelay".
	Group string

	// ExactlyOnce writes each occurrence and the schedule's progress in one
	// Kafka transaction, so that a consumer reading with
	// isolation.level=read_committed sees each occurrence once, across
	// crashes. Default false: at-least-once, where a crash may write an
	// occurrence again, with the same kdelay-id.
	ExactlyOnce bool

	// AsReader has the scheduler read the schedules topic as a
	// forwarder.Reader (Scheduler.Reader) on the forwarders' client, in
	// their group (Group itself), as kdelay serve runs it, rather than on a
	// client and in a group of its own, "<group>.schedules". Exactly-once
	// it then writes into their transaction. Run still runs its loop.
	// Default false.
	AsReader bool

	// InstanceID names this process in the consumer group (static
	// membership, as the forwarder's) and in its transactional id. Required:
	// the forwarder's.
	InstanceID string

	// TransactionalIDSuffix is added to the transactional id, as the
	// forwarder's Config.TransactionalIDSuffix is. Default none.
	TransactionalIDSuffix string

	// Lookahead is how long before its time an occurrence is written into
	// the ingress. A replace or delete cancels the occurrences written and
	// not yet due (see docs/SCHEDULES.md). Default DefaultLookahead, 1m.
	Lookahead time.Duration

	// MaxDelay is the server's max-delay: schedules are checked with it.
	// Default kdelay.DefaultMaxDelay, 400 days.
	MaxDelay time.Duration

	// Batch bounds the occurrences written in one step. Default
	// DefaultBatch, 1000.
	Batch int

	// SessionTimeout of the consumer group. Default DefaultSessionTimeout,
	// 10s.
	SessionTimeout time.Duration

	// ShutdownTimeout bounds a stop. Default DefaultShutdownTimeout, 10s.
	ShutdownTimeout time.Duration

	// Partitions of the schedules topic, when kdelay creates it. Default
	// DefaultPartitions, 6.
	Partitions int32

	// ReplicationFactor of the schedules topic, when kdelay creates it; -1
	// is the broker's default. Default DefaultReplicationFactor, -1.
	ReplicationFactor int16

	// Compact makes the scheduler compact the schedules topic itself, for a
	// broker that does not: kdelay's embedded one (see compact.go). It
	// needs DeleteRecords on the topic. Default false: the brokers compact
	// it, as its cleanup.policy=compact says.
	Compact bool

	// ClientOpts are added to every Kafka client the scheduler makes: TLS,
	// SASL, a dialer, a logger.
	ClientOpts []kgo.Opt

	// Client, if set, is a client outside any group and any transaction
	// that Run uses rather than make one of its own: for its admin requests
	// (the topic, offsets, trims), the fences that end a load, and its
	// at-least-once writes. Its partitioner must be Partitioner(Topics).
	// AsReader, kdelay serve gives it the client its forwarders use outside
	// their group, so that the process holds one set of connections fewer;
	// the read-backs then go on the forwarders' client. Otherwise they go
	// on this one, and wait behind any fetch it has in flight: give one
	// that consumes nothing, or with a short FetchMaxWait. Run does not
	// close it. Default: Run makes one.
	Client *kgo.Client

	// Logger receives the scheduler's logs. Default: discard.
	Logger *slog.Logger

	// NowFunc returns the current time. Default time.Now.
	NowFunc func() time.Time

	// beforeProgress is called between writing occurrences and writing the
	// progress that counts them: tests stop a process there, as a crash
	// would. Default: none.
	beforeProgress func()
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.Topics.Prefix = cmp.Or(c.Topics.Prefix, kdelay.DefaultPrefix)
	c.Group = cmp.Or(c.Group, DefaultGroup)
	c.Lookahead = cmp.Or(c.Lookahead, DefaultLookahead)
	c.MaxDelay = cmp.Or(c.MaxDelay, kdelay.DefaultMaxDelay)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.Partitions = cmp.Or(c.Partitions, DefaultPartitions)
	c.ReplicationFactor = cmp.Or(c.ReplicationFactor, DefaultReplicationFactor)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}

// validate reports every problem of c, naming Config's fields.
func (c Config) validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("schedule: %s: %s", field, fmt.Sprintf(format, args...)))
	}
	if len(c.Brokers) == 0 {
		fail("Brokers", "no seed brokers; list at least one host:port")
	}
	if c.InstanceID == "" {
		fail("InstanceID", "empty; set the forwarder's, unique among the processes sharing Group and stable across restarts")
	}
	if c.Lookahead < 0 || c.Lookahead > c.MaxDelay {
		fail("Lookahead", "%s; use a positive duration below MaxDelay (%s), or 0 for the default %s", c.Lookahead, c.MaxDelay, DefaultLookahead)
	}
	if c.Batch < 0 {
		fail("Batch", "%d; use at least 1, or 0 for the default %d", c.Batch, DefaultBatch)
	}
	if c.Partitions < 1 {
		fail("Partitions", "%d; use at least 1", c.Partitions)
	}
	if err := c.checkClient(); err != nil {
		fail("Client", "%v", err)
	}
	return errors.Join(errs...)
}

// checkClient refuses a Client that would write the scheduler's records
// where it does not read them, or inside a group's or a transaction's
// rules it does not follow.
func (c Config) checkClient() error {
	if c.Client == nil {
		return nil
	}
	if p, ok := c.Client.OptValue(kgo.RecordPartitioner).(partitioner); !ok || p.schedules != c.Topics.Schedules() {
		return fmt.Errorf("its partitioner would put progress records in the wrong partitions of %s: make it with kgo.RecordPartitioner(schedule.Partitioner(topics))", c.Topics.Schedules())
	}
	if c.Client.OptValue(kgo.ConsumerGroup) != "" || c.Client.OptValue(kgo.TransactionalID) != "" {
		return errors.New("it is in a consumer group or transactional: give a client outside any group and transaction")
	}
	return nil
}

// group is the consumer group of the schedules topic on a client of its
// own, and the one an AsReader scheduler waits to be empty (shared.go).
func (c *Config) group() string { return c.Group + ".schedules" }

// Group is the consumer group that shares the schedules among schedulers
// on clients of their own with the group setting group: "<group>.schedules".
// kdelay serve's (AsReader) share them in group itself since 2026-11-30.
func Group(group string) string { return (&Config{Group: group}).group() }
