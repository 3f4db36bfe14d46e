// Package kafkago is package client for segmentio/kafka-go: delayed messages
// for a kafka.Writer, and idempotent handlers for what a kafka.Reader reads.
// It shares client's Delay, ProducerConfig and Store.
//
// # Writer settings
//
// A Producer needs a Writer that reports lost writes, and a few of kafka-go's
// defaults work against it:
//
//	w := &kafka.Writer{
//		Addr:         kafka.TCP("localhost:9092"),
//		RequiredAcks: kafka.RequireAll,     // default RequireNone: fire and forget, writes can be lost
//		BatchTimeout: 5 * time.Millisecond, // default 1s: each Send would wait up to a second
//		Balancer:     &kafka.Hash{},        // default round robin; see below
//	}
//
// Field by field:
//
//   - Topic must be empty: the Producer names a level or ingress topic per
//     message, and kafka-go refuses a message Topic when the Writer has one.
//   - RequiredAcks must not be kafka.RequireNone, its default: the broker
//     would not acknowledge writes, and a lost one would go unnoticed.
//     NewProducer refuses it; use kafka.RequireAll.
//   - Async must be false: an async Writer drops write errors. NewProducer
//     refuses it.
//   - BatchTimeout defaults to one second, and kafka-go holds a batch that
//     long unless BatchSize (default 100) messages fill it first, so each
//     Send would wait up to a second. The due time is fixed when Send is
//     called, but a level topic releases each partition's records in the
//     order they were written, so a message held back in a batch while
//     newer ones are written ahead of it can wait behind them for as long.
//     Set BatchTimeout to a few milliseconds, or BatchSize to 1.
//   - Balancer picks the partition of kdelay's own topic, not of the
//     target: kdelay places the delivered record on the target by its key,
//     with Kafka's murmur2 partitioner as Java producers do. Messages with
//     the same key stay together on the way only with a key-hashing
//     balancer, kafka.Hash{} or kafka.Murmur2Balancer{}; that matters where
//     two of them are due at the same time and their order counts.
package kafkago
