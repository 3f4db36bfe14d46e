package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/config"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/levels"
)

// statusTimeout bounds the whole of `kdelay status` once a broker answered:
// a few admin requests and one fetch per partition with records.
const statusTimeout = 30 * time.Second

func newStatus() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what waits in each level: pending records, the oldest due time, how late, the group's members",
		Long: `Read from Kafka, for the ingress and each level, what a running fleet of kdelay
serve has not yet forwarded:

  PARTITIONS  the topic's partitions
  PENDING     records its consumer group (<group>.ingress, <group>.level.<name>) has
              not committed: end offset minus committed offset, summed over partitions
  OLDEST DUE  when the earliest head leaves it: the head's timestamp plus the level's
              delay (the ingress forwards on arrival)
  HEAD LATE   now minus OLDEST DUE: how late that head is; negative while it waits
  MEMBERS     kdelay processes in the group, and the group's state

A level topic of the prefix that is not in --levels, which serve drains, is shown
too. Status only reads: it works from any machine that reaches the brokers. Give it
the topic-prefix, group and levels serve runs with (flags, KDELAY_* or --config).`,
		Example: "  kdelay status --brokers kafka-1:9092\n  kdelay status --json | jq 'select(.pending > 0)'",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cmd.Flags(), os.Environ())
			if err != nil {
				return usageError{err}
			}
			now := time.Now()
			st, err := readStatus(cmd.Context(), cfg, now)
			if err != nil {
				return err
			}
			if asJSON {
				return writeStatusJSON(cmd.OutOrStdout(), st)
			}
			return writeStatusTable(cmd.OutOrStdout(), st)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per level, one per line, for scripts")
	config.AddClientFlags(cmd.Flags(), "group", "levels")
	return cmd
}

// stage is one forwarder of a kdelay fleet as status sees it from Kafka:
// the topic it reads, the consumer group it reads it with and how long a
// record waits there. The group names are forwarder.Config.Group's:
// "<group>.ingress" and "<group>.level.<name>".
type stage struct {
	name, topic, group string
	wait               time.Duration
	configured         bool // false for a dropped level serve drains
}

func stages(cfg config.Config) []stage {
	t := kdelay.Topics{Prefix: cfg.TopicPrefix}
	ss := []stage{{name: "ingress", topic: t.Ingress(), group: forwarder.IngressGroup(cfg.Group), configured: true}}
	for _, l := range cfg.Levels {
		ss = append(ss, levelStage(cfg, l, true))
	}
	return ss
}

func levelStage(cfg config.Config, l levels.Level, configured bool) stage {
	return stage{name: l.Name, topic: kdelay.Topics{Prefix: cfg.TopicPrefix}.Level(l.Name),
		group: forwarder.LevelGroup(cfg.Group, l.Name), wait: l.Delay, configured: configured}
}

// levelStatus is one line of `kdelay status`, and one object of --json.
type levelStatus struct {
	Level      string `json:"level"` // "ingress", or the level's name
	Topic      string `json:"topic"`
	Group      string `json:"group"`
	Configured bool   `json:"configured"` // false: a dropped level, drained by serve
	Partitions int    `json:"partitions"`
	Pending    int64  `json:"pending"` // records the group has not committed
	// OldestDue is when the earliest head leaves the topic; absent when
	// nothing is pending or no head could be read.
	OldestDue *time.Time `json:"oldest_due,omitempty"`
	// HeadLateness is now minus OldestDue, in seconds: negative while the
	// head waits.
	HeadLateness *float64 `json:"head_lateness_seconds,omitempty"`
	Members      int      `json:"members"`
	State        string   `json:"state"`             // the group's: Stable, Empty, PreparingRebalance, ... or "none"
	Problem      string   `json:"problem,omitempty"` // why a figure is missing
}

// readStatus reads every stage's figures from Kafka.
func readStatus(ctx context.Context, cfg config.Config, now time.Time) ([]levelStatus, error) {
	cl, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	ss, err := withDropped(ctx, adm, cfg)
	if err != nil {
		return nil, err
	}
	offs, err := readOffsets(ctx, adm, ss)
	if err != nil {
		return nil, err
	}
	st := make([]levelStatus, len(ss))
	missing := 0
	for i, s := range ss {
		st[i] = offs.status(s)
		if st[i].Partitions == 0 {
			missing++
		}
	}
	if missing == len(ss) {
		return nil, fmt.Errorf("no kdelay topics with prefix %q on %s: check --topic-prefix, or start kdelay serve (it creates them)",
			cfg.TopicPrefix, strings.Join(cfg.Seeds(), ","))
	}
	heads := readHeads(ctx, cfg, offs.positions(ss))
	for i, s := range ss {
		heads.apply(&st[i], s, now)
	}
	return st, nil
}

// withDropped adds to the configured stages the level topics of the prefix
// that no configured level names: serve drains them, and until it has they
// hold records.
func withDropped(ctx context.Context, adm *kadm.Client, cfg config.Config) ([]stage, error) {
	ss := stages(cfg)
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var dropped []stage
	known := map[string]bool{}
	for _, s := range ss {
		known[s.topic] = true
	}
	for _, topic := range topics.Names() {
		name, ok := strings.CutPrefix(topic, kdelay.Topics{Prefix: cfg.TopicPrefix}.Level(""))
		if !ok || known[topic] {
			continue
		}
		if set, err := levels.Parse([]string{name}); err == nil {
			dropped = append(dropped, levelStage(cfg, set[0], false))
		}
	}
	slices.SortFunc(dropped, func(a, b stage) int { return cmp.Compare(a.wait, b.wait) })
	return append(ss, dropped...), nil
}

func writeStatusJSON(w io.Writer, st []levelStatus) error {
	enc := json.NewEncoder(w)
	for _, s := range st {
		if err := enc.Encode(s); err != nil {
			return fmt.Errorf("write status: %w", err)
		}
	}
	return nil
}

// writeStatusTable prints st as a table, with a NOTE column when a figure
// is missing:
//
//	LEVEL    TOPIC            PARTITIONS  PENDING  OLDEST DUE                HEAD LATE  MEMBERS
//	ingress  kdelay.ingress   6           0        -                         -          1 Stable
//	1h       kdelay.level.1h  6           3        2026-11-22T12:57:08.509Z  -59m58s    1 Stable
func writeStatusTable(w io.Writer, st []levelStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	notes := slices.ContainsFunc(st, func(s levelStatus) bool { return s.Problem != "" })
	head := "LEVEL\tTOPIC\tPARTITIONS\tPENDING\tOLDEST DUE\tHEAD LATE\tMEMBERS"
	if notes {
		head += "\tNOTE"
	}
	fmt.Fprintln(tw, head)
	for _, s := range st {
		due, late := "-", "-"
		if s.OldestDue != nil {
			due = s.OldestDue.UTC().Format(timeFormat)
			late = lateText(time.Duration(*s.HeadLateness * float64(time.Second)))
		}
		level := s.Level
		if !s.Configured {
			level += " (dropped)"
		}
		row := fmt.Sprintf("%s\t%s\t%d\t%d\t%s\t%s\t%d %s", level, s.Topic, s.Partitions, s.Pending, due, late, s.Members, s.State)
		if notes {
			row += "\t" + s.Problem
		}
		fmt.Fprintln(tw, row)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// lateText is a lateness as ageText writes it, with a minus sign while the
// head is not yet due.
func lateText(d time.Duration) string {
	if d < 0 {
		return "-" + ageText(-d)
	}
	return ageText(d)
}

// ageText is an age as a person reads it: 4.2s, 3m12s, 26h5m0s.
func ageText(d time.Duration) string {
	if d < time.Minute {
		return short(max(d, 0))
	}
	return d.Round(time.Second).String()
}

// groupState is the state of a described group, "none" when Kafka knows no
// such group (nothing ever joined it or committed for it).
func groupState(g kadm.DescribedGroup, ok bool) (string, error) {
	switch {
	case !ok, errors.Is(g.Err, kerr.GroupIDNotFound), g.Err == nil && g.State == "Dead":
		return "none", nil
	case g.Err != nil:
		return "", g.Err
	}
	return g.State, nil
}

// plural writes n and noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
