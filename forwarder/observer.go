package forwarder

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay/stages"
)

// IngressLevel is the level name under which the ingress router reports, in
// Observer.Level and LevelState: no delay level can be called that, since
// level names are durations.
const IngressLevel = stages.Ingress

// Observer is told what the forwarders do, record by record, so that a
// program can count it: package admin turns it into Prometheus metrics, and
// an embedder can plug in its own, as franz-go's hooks do. It sees no
// record's content, target or id, only which level handled it and how.
type Observer interface {
	// Level is called once for each forwarder, before its Kafka client is
	// made, with the name of its level (IngressLevel for the ingress
	// router; a dropped level being drained reports under its own name).
	// What it returns receives that forwarder's events.
	Level(name string) LevelObserver
}

// ClientObserver is an Observer with hooks for a Kafka client that serves
// every level: in at-least-once delivery one client reads and writes for all
// of them, and gets these options after Config.ClientOpts instead of any
// LevelObserver's. Package admin labels its kprom metrics level="all" then.
type ClientObserver interface {
	Observer
	ClientOpts() []kgo.Opt
}

// LevelObserver receives the events of one forwarder. Its methods are called
// from the forwarder's loop and from the Kafka client's produce callbacks,
// concurrently, once per record: they must be safe for concurrent use, must
// not block, and should not allocate.
type LevelObserver interface {
	// Handled is called the moment the matching Stats field counts a
	// record: an Outcome per call, so a held remainder is reported as Held
	// when it is held and as Delivered when its target acknowledges it,
	// like Stats.
	Handled(Outcome)

	// Delivered is called when the broker acknowledges a record produced
	// to its target, with its lateness: the time of the acknowledgement
	// minus the record's due time, the instant its kdelay-deliver-at
	// header holds (negative would be early, which kdelay never is); for a
	// record written to the ingress already past due (PastDue), from when
	// it was written, so that a producer's mistake is not kdelay's lateness. A
	// record produced again after a failure is reported once, when it is
	// acknowledged. In exactly-once delivery a read_committed consumer sees
	// it when its transaction commits, up to a CommitInterval later.
	Delivered(lateness time.Duration)

	// ClientOpts are added to this forwarder's Kafka client after
	// Config.ClientOpts when it has one of its own (exactly-once): hooks
	// that must see one client each, such as kprom's metrics, labelled
	// with the level. See ClientObserver for the client levels share.
	ClientOpts() []kgo.Opt
}

// Outcome is what happened to a record a forwarder handled: the Stats field
// that counted it.
type Outcome uint8

const (
	Delivered    Outcome = iota // acknowledged by its target (Stats.Delivered)
	Hopped                      // produced to a level topic (Stats.Hopped)
	Held                        // a remainder below the smallest level held until due (Stats.Held)
	DeadLettered                // produced to the DLQ (Stats.DeadLettered)
	Retried                     // a failed produce to be tried again (Stats.Retried)
	Cancelled                   // not delivered: a cancel command names it (Stats.Cancelled)
	PastDue                     // written to the ingress already past its due time (Stats.PastDue)
	HandedBack                  // held in memory, written back to the ingress as its partition moved (Stats.HandedBack)

	OutcomeCount = iota // how many there are, for arrays indexed by Outcome
)

// String is the outcome's name, as metrics and logs write it.
func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Hopped:
		return "hopped"
	case Held:
		return "held"
	case DeadLettered:
		return "dead_lettered"
	case Retried:
		return "retried"
	case Cancelled:
		return "cancelled"
	case PastDue:
		return "past_due"
	case HandedBack:
		return "handed_back"
	}
	return "unknown"
}

// Outcomes lists every Outcome, for an Observer that prepares a counter for
// each.
func Outcomes() []Outcome {
	return []Outcome{Delivered, Hopped, Held, DeadLettered, Retried, Cancelled, PastDue, HandedBack}
}

// count counts one record's outcome in the worker's Stats and tells its
// observer. mu must be held.
func (w *worker) count(o Outcome) {
	switch o {
	case Delivered:
		w.stats.Delivered++
	case Hopped:
		w.stats.Hopped++
	case Held:
		w.stats.Held++
	case DeadLettered:
		w.stats.DeadLettered++
	case Retried:
		w.stats.Retried++
	case Cancelled:
		w.stats.Cancelled++
	case PastDue:
		w.stats.PastDue++
	case HandedBack:
		w.stats.HandedBack++
	}
	w.obs.Handled(o)
}

// nopObserver is the observer of a Config without one.
type nopObserver struct{}

func (nopObserver) Level(string) LevelObserver { return nopObserver{} }
func (nopObserver) Handled(Outcome)            {}
func (nopObserver) Delivered(time.Duration)    {}
func (nopObserver) ClientOpts() []kgo.Opt      { return nil }
