package forwarder

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/levels"
)

// Mode chooses how a level forwarder watches the heads of its partitions.
type Mode string

const (
	// ModeExact pauses a partition whose head is not due and wakes exactly
	// when it is, never sleeping longer than CheckInterval.
	ModeExact Mode = "exact"

	// ModePoll behaves like RocketMQ's delay levels: it looks at every head
	// each CheckInterval and does nothing in between. It exists so that the
	// benchmark can compare the two designs on the same broker.
	ModePoll Mode = "poll"
)

// Config configures a Forwarder. The zero value of every field but Brokers
// is replaced by its default in WithDefaults.
type Config struct {
	// Brokers are the seed brokers. Required.
	Brokers []string

	// Topics names kdelay's topics. Default prefix "kdelay".
	Topics kdelay.Topics

	// Levels are the delay levels. Default levels.Default(), 1s to 2h.
	Levels levels.Set

	// Group prefixes the consumer group of each forwarder: "<group>.ingress",
	// "<group>.level.1s". Every kdelay process that shares it shares the
	// work. Default "kdelay".
	Group string

	// Mode is ModeExact (default) or ModePoll.
	Mode Mode

	// CheckInterval is the longest a forwarder sleeps without looking at its
	// partitions, and the tick of ModePoll. Default 100ms.
	CheckInterval time.Duration

	// FetchMaxWait bounds how long a fetch waits for new records. A
	// partition resumed while a fetch is in flight is fetched after it ends,
	// so a paused partition is resumed this long (plus CheckInterval) before
	// its last buffered record is due. Default 500ms.
	FetchMaxWait time.Duration

	// MaxDelay is the longest delay accepted; longer ones are dead-lettered.
	// Default 400 days.
	MaxDelay time.Duration

	// CommitInterval is how often handed-on offsets are committed. A crash
	// re-delivers at most this much work. Default 1s.
	CommitInterval time.Duration

	// SessionTimeout is how long a consumer group waits for a member that
	// stopped answering (a crashed or frozen kdelay) before handing its
	// partitions to the others; their records wait that long. The broker
	// bounds it (group.min.session.timeout.ms, 6s by default). Default 45s.
	SessionTimeout time.Duration

	// ShutdownTimeout bounds how long shutdown and a revoke wait for
	// in-flight produces. Default 10s.
	ShutdownTimeout time.Duration

	// Partitions is the partition count of the topics kdelay creates.
	// Default 6.
	Partitions int32

	// ReplicationFactor of the topics kdelay creates; -1 uses the broker's
	// default.replication.factor. Default -1.
	ReplicationFactor int16

	// Retention is retention.ms of the topics kdelay creates. It must exceed
	// the largest level by at least RetentionHeadroom. Default 7 days.
	Retention time.Duration

	// RetentionHeadroom is how much longer than its level an existing level
	// topic must keep records, so that records survive kdelay being down
	// that long. Default 1h.
	RetentionHeadroom time.Duration

	// ClientOpts are added to every Kafka client kdelay makes: TLS, SASL,
	// a dialer, a logger.
	ClientOpts []kgo.Opt

	// Logger receives kdelay's logs. Default: discard.
	Logger *slog.Logger

	// NowFunc returns the current time. Default time.Now.
	NowFunc func() time.Time
}

// WithDefaults returns a copy of c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	c.Topics.Prefix = cmp.Or(c.Topics.Prefix, kdelay.DefaultPrefix)
	if len(c.Levels) == 0 {
		c.Levels = levels.Default()
	}
	c.Group = cmp.Or(c.Group, "kdelay")
	c.Mode = cmp.Or(c.Mode, ModeExact)
	c.CheckInterval = cmp.Or(c.CheckInterval, 100*time.Millisecond)
	c.FetchMaxWait = cmp.Or(c.FetchMaxWait, 500*time.Millisecond)
	c.MaxDelay = cmp.Or(c.MaxDelay, 400*24*time.Hour)
	c.CommitInterval = cmp.Or(c.CommitInterval, time.Second)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, 45*time.Second)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 10*time.Second)
	c.Partitions = cmp.Or(c.Partitions, 6)
	c.ReplicationFactor = cmp.Or(c.ReplicationFactor, -1)
	c.Retention = cmp.Or(c.Retention, 7*24*time.Hour)
	c.RetentionHeadroom = cmp.Or(c.RetentionHeadroom, time.Hour)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("brokers: no seed brokers; list at least one host:port"))
	}
	if c.Mode != ModeExact && c.Mode != ModePoll {
		errs = append(errs, fmt.Errorf("mode: %q is not a mode; use %q or %q", c.Mode, ModeExact, ModePoll))
	}
	for name, d := range map[string]time.Duration{
		"check-interval": c.CheckInterval, "fetch-max-wait": c.FetchMaxWait, "max-delay": c.MaxDelay,
		"commit-interval": c.CommitInterval, "shutdown-timeout": c.ShutdownTimeout, "session-timeout": c.SessionTimeout, "retention-headroom": c.RetentionHeadroom,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: %s is negative; use a positive duration such as 100ms", name, d))
		}
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("partitions: %d; use at least 1", c.Partitions))
	}
	if need := c.Levels.Largest().Delay + c.RetentionHeadroom; c.Retention < need {
		errs = append(errs, fmt.Errorf("retention: %s is shorter than the largest level %s plus %s of headroom; use at least %s",
			c.Retention, c.Levels.Largest().Name, c.RetentionHeadroom, need))
	}
	if c.MaxDelay < c.Levels.Smallest().Delay {
		errs = append(errs, fmt.Errorf("max-delay: %s is below the smallest level %s; raise it", c.MaxDelay, c.Levels.Smallest().Name))
	}
	return errors.Join(errs...)
}

type stage struct {
	topic string
	group string // suffix of Config.Group
	wait  time.Duration
}

// stages are the topics forwarded: the ingress, then each level.
func (c *Config) stages() []stage {
	s := []stage{{topic: c.Topics.Ingress(), group: ".ingress"}}
	for _, l := range c.Levels {
		s = append(s, stage{topic: c.Topics.Level(l.Name), group: ".level." + l.Name, wait: l.Delay})
	}
	return s
}

// ownTopics are every topic kdelay reads or writes besides targets.
func (c *Config) ownTopics() []string {
	topics := []string{c.Topics.DLQ()}
	for _, s := range c.stages() {
		topics = append(topics, s.topic)
	}
	return topics
}
