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
// one per source and one per id (see chooser). A source f names that is not
// there is an error (*UnknownSourcesError), so that a mistake replays
// nothing; so is a filter that matches none (*NoMatchError).
func (fl *Fleet) Choose(ctx context.Context, f Filter, progress Progress) ([]DeadLetter, error) {
	c := newChooser(f)
	if err := fl.DeadLetters(ctx, progress, c.add); err != nil {
		return nil, err
	}
	return c.result(fl.cfg.Topics.DLQ(), 0)
}

// ChooseNewest is Choose among the newest n dead letters only, read as
// NewestDeadLetters reads them, so that it costs the same however many dead
// letters wait: an older one is neither read nor chosen, and a source f
// names that is older is unknown. It returns what it read too, which says
// whether that was every dead letter. The chosen are in the order of the
// topic, as Choose returns them.
func (fl *Fleet) ChooseNewest(ctx context.Context, f Filter, n int) ([]DeadLetter, Newest, error) {
	newest, err := fl.NewestDeadLetters(ctx, n)
	if err != nil {
		return nil, Newest{}, err
	}
	c := newChooser(f)
	// Oldest first: Replay writes them in this order, and a key's records
	// must go back in the order they failed.
	for _, d := range slices.Backward(newest.Letters) {
		c.add(d)
	}
	among := len(newest.Letters)
	if newest.All {
		among = 0
	}
	chosen, err := c.result(fl.cfg.Topics.DLQ(), among)
	return chosen, newest, err
}

// chooser keeps the dead letters a filter matches, one per source: a source
// dead-lettered twice (kdelay crashed after writing the dead letter, before
// committing) is replayed once; and one per id, the newest: a replayed record
// dead-lettered again (its delay still beyond max-delay, say) is a second
// dead letter with the same id and another source, and replaying both would
// leave two records pending with one id.
type chooser struct {
	f       Filter
	sources map[string]bool
	ids     map[string]int // index in chosen
	chosen  []DeadLetter
}

func newChooser(f Filter) *chooser {
	return &chooser{f: f, sources: map[string]bool{}, ids: map[string]int{}}
}

// result is what c chose from topic, or why nothing: among is how many of
// the newest dead letters it was given, 0 when it was given every one.
func (c *chooser) result(topic string, among int) ([]DeadLetter, error) {
	var missing []string
	for s := range c.f.Sources {
		if !c.sources[s] {
			missing = append(missing, s)
		}
	}
	switch {
	case len(missing) > 0:
		slices.Sort(missing)
		return nil, &UnknownSourcesError{Topic: topic, Sources: missing, Among: among}
	case len(c.chosen) == 0:
		return nil, &NoMatchError{Topic: topic, Filter: c.f, Among: among}
	}
	return c.chosen, nil
}

func (c *chooser) add(d DeadLetter) {
	if !c.f.Match(d) || c.sources[d.Source] {
		return
	}
	c.sources[d.Source] = true
	if i, ok := c.ids[d.ID()]; ok {
		if d.Record.Timestamp.After(c.chosen[i].Record.Timestamp) {
			c.chosen[i] = d
		}
		return
	}
	c.ids[d.ID()] = len(c.chosen)
	c.chosen = append(c.chosen, d)
}

// UnknownSourcesError names the sources asked for that no dead letter
// matching the rest of the filter has.
type UnknownSourcesError struct {
	Topic   string
	Sources []string
	Among   int // the newest dead letters looked at, 0 for all
}

func (e *UnknownSourcesError) Error() string {
	return fmt.Sprintf("no dead letter %s has source %s (and reason and target as asked); nothing was replayed", among(e.Topic, e.Among), strings.Join(e.Sources, ", "))
}

// NoMatchError is a filter no dead letter matches.
type NoMatchError struct {
	Topic  string
	Filter Filter
	Among  int // the newest dead letters looked at, 0 for all
}

func (e *NoMatchError) Error() string {
	return fmt.Sprintf("no dead letter %s matches %s: nothing to replay", among(e.Topic, e.Among), e.Filter.Describe())
}

// among says which dead letters of topic were looked at.
func among(topic string, n int) string {
	if n == 0 {
		return "in " + topic
	}
	return fmt.Sprintf("among the newest %d in %s", n, topic)
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
