package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// replayTimeout bounds the wait for the broker to acknowledge the replayed
// records.
const replayTimeout = 15 * time.Second

// Choose reads the dead-letter topic and returns the dead letters f matches,
// one per source: a source dead-lettered twice (kdelay crashed after writing
// the dead letter, before committing) is replayed once. A source f names
// that is not there is an error (*UnknownSourcesError), so that a mistake
// replays nothing; so is a filter that matches none (*NoMatchError).
func (fl *Fleet) Choose(ctx context.Context, f Filter, progress Progress) ([]DeadLetter, error) {
	var chosen []DeadLetter
	seen := map[string]bool{}
	err := fl.DeadLetters(ctx, progress, func(d DeadLetter) {
		if f.Match(d) && !seen[d.Source] {
			seen[d.Source] = true
			chosen = append(chosen, d)
		}
	})
	if err != nil {
		return nil, err
	}
	var missing []string
	for s := range f.Sources {
		if !seen[s] {
			missing = append(missing, s)
		}
	}
	switch {
	case len(missing) > 0:
		slices.Sort(missing)
		return nil, &UnknownSourcesError{Topic: fl.cfg.Topics.DLQ(), Sources: missing}
	case len(chosen) == 0:
		return nil, &NoMatchError{Topic: fl.cfg.Topics.DLQ(), Filter: f}
	}
	return chosen, nil
}

// UnknownSourcesError names the sources asked for that no dead letter
// matching the rest of the filter has.
type UnknownSourcesError struct {
	Topic   string
	Sources []string
}

func (e *UnknownSourcesError) Error() string {
	return fmt.Sprintf("no dead letter in %s has source %s (and reason and target as asked); nothing was replayed", e.Topic, strings.Join(e.Sources, ", "))
}

// NoMatchError is a filter no dead letter matches.
type NoMatchError struct {
	Topic  string
	Filter Filter
}

func (e *NoMatchError) Error() string {
	return fmt.Sprintf("no dead letter in %s matches %s: nothing to replay", e.Topic, e.Filter.Describe())
}

// Replayed is what became of one chosen dead letter: refused (Refused says
// why), not acknowledged (Err), or written to the ingress (Record, with its
// partition and offset).
type Replayed struct {
	Letter  DeadLetter
	Record  *kgo.Record
	Refused error // the record is not one kdelay can deliver: see DeadLetter.Replay
	Err     error // the broker did not take it
}

// Replay writes the chosen dead letters to the ingress, in the DLQ's order,
// so those of one key stay in order, and waits for the broker to
// acknowledge them. Each is checked first with DeadLetter.Replay: those it
// refuses are not written. The results are in chosen's order.
func (fl *Fleet) Replay(ctx context.Context, chosen []DeadLetter) []Replayed {
	out := make([]Replayed, len(chosen))
	var recs []*kgo.Record
	at := map[*kgo.Record]int{}
	for i, d := range chosen {
		out[i].Letter = d
		r, err := d.Replay(fl.cfg.Rules())
		if err != nil {
			out[i].Refused = err
			continue
		}
		out[i].Record, at[r] = r, i
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, replayTimeout)
	defer cancel()
	for _, res := range fl.cl.ProduceSync(ctx, recs...) {
		out[at[res.Record]].Err = res.Err
	}
	return out
}
