package admin

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kdelay/kdelay/schedule"
)

// The metrics read at each scrape: from the forwarder's memory, and from
// Kafka for what waits in the topics.
var (
	pendingDesc = prometheus.NewDesc(Namespace+"_pending_records",
		"Records in the level's topic its consumer group has not committed (end offset minus committed offset, summed over partitions; from the start of a partition never committed), as kdelay status counts them. Every kdelay of the group reports the whole level: aggregate with max.",
		[]string{"level"}, nil)
	oldestDueDesc = prometheus.NewDesc(Namespace+"_oldest_due_age_seconds",
		"How long ago the oldest record this kdelay holds for the level and has not handed on was due to leave it; 0 when none is overdue. It grows while a partition is stuck or a produce is retried.",
		[]string{"level"}, nil)
	pausedDesc = prometheus.NewDesc(Namespace+"_paused_partitions",
		"Partitions of the level this kdelay does not fetch from, because their buffered records are not due soon or its memory share is full.",
		[]string{"level"}, nil)
	bufferedDesc = prometheus.NewDesc(Namespace+"_buffered_bytes",
		"What the records this kdelay holds for the level count against max-buffered-bytes: fetched and not handed on, or handed on and not yet acknowledged, each its key, value and headers plus 640 bytes of bookkeeping.",
		[]string{"level"}, nil)
	borrowedDesc = prometheus.NewDesc(Namespace+"_buffer_borrowed_bytes",
		"Of kdelay_buffered_bytes, what the level holds beyond its reserve, borrowed from the pool its forwarders share.",
		[]string{"level"}, nil)
	budgetDesc = prometheus.NewDesc(Namespace+"_buffer_budget_bytes",
		"What the records this kdelay holds may count in all now: max-buffered-bytes less what the scheduler's index holds (kdelay_schedule_index_bytes), at least 256 KiB a level.",
		nil, nil)
	commandsLiveDesc = prometheus.NewDesc(Namespace+"_commands_live",
		"Commands (cancel, reschedule, run-now) this kdelay keeps in memory: those written within the largest level plus retention-headroom. Every kdelay reads them all: aggregate with max.",
		nil, nil)
	commandsDesc = prometheus.NewDesc(Namespace+"_commands_total",
		"Command records this kdelay read from the control topic, by what became of them: read (valid), invalid (refused, logged as command_invalid), matched (applied to a record by this kdelay), unmatched (kept their time without matching a record: the message was delivered before, or the id is unknown; logged as command_unmatched, counted by the kdelay that owns ingress partition 0 only).",
		[]string{"result"}, nil)
	stuckDesc = prometheus.NewDesc(Namespace+"_stuck",
		"1 while this kdelay's forwarder of the level is stuck: it holds a record past its due time and has handed nothing on for stuck-after (at least once: no produce acknowledged; exactly once: no transaction committed); 0 otherwise. reason says why: produce (its produces fail), transaction (its transactions abort), no_progress (nothing fails and nothing moves); empty when 0.",
		[]string{"level", "reason"}, nil)
	schedulesDesc = prometheus.NewDesc(Namespace+"_schedules",
		"Recurring schedules in force in the partitions of the schedules topic this kdelay owns. Every kdelay reports its own share: aggregate with sum.",
		nil, nil)
	scheduleNextDesc = prometheus.NewDesc(Namespace+"_schedule_next_occurrence_timestamp_seconds",
		"The time (unix seconds) of the earliest occurrence of those schedules this kdelay has yet to write into the ingress: it writes each a minute ahead, so those due sooner are written already. Absent when there is none. Aggregate with min.",
		nil, nil)
	scheduleOccurrencesDesc = prometheus.NewDesc(Namespace+"_schedule_occurrences_total",
		"Occurrences of recurring schedules this kdelay wrote into the ingress (acknowledged; committed, exactly once), each delivered to its target at its time by the forwarder, which counts it in kdelay_delivered_total too.",
		nil, nil)
	scheduleLateDesc = prometheus.NewDesc(Namespace+"_schedule_occurrences_late_total",
		"Of kdelay_schedule_occurrences_total, those written after their time, and so delivered late: missed while no kdelay could write them (kdelay-missed: latest delivers the latest once), or written by a scheduler behind.",
		nil, nil)
	scheduleIndexDesc = prometheus.NewDesc(Namespace+"_schedule_index_bytes",
		"Bytes the scheduler of this kdelay holds for the schedule ids of its partitions of the schedules topic: a slot each, its hash table and queue, as allocated (docs/SCHEDULES.md bounds it at 72 bytes a schedule id). The schedules themselves stay in the topic. Aggregate with sum.",
		nil, nil)
	readyDesc = prometheus.NewDesc(Namespace+"_ready",
		"1 when /readyz would answer 200: started, every level assigned and none stuck, a broker answers; 0 otherwise.",
		nil, nil)
)

// gauges collects the metrics read at each scrape.
type gauges struct{ s *Server }

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{pendingDesc, oldestDueDesc, pausedDesc, bufferedDesc, borrowedDesc, budgetDesc, stuckDesc, commandsLiveDesc, commandsDesc, readyDesc} {
		ch <- d
	}
	if g.s.cfg.Scheduler != nil {
		for _, d := range []*prometheus.Desc{schedulesDesc, scheduleNextDesc, scheduleOccurrencesDesc, scheduleLateDesc, scheduleIndexDesc} {
			ch <- d
		}
	}
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	s := g.s
	levels := s.cfg.Forwarder.Levels()
	now := time.Now()
	for _, l := range levels {
		age := 0.0
		if !l.OldestDue.IsZero() {
			age = max(now.Sub(l.OldestDue), 0).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(oldestDueDesc, prometheus.GaugeValue, age, l.Level)
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, float64(l.Paused), l.Level)
		ch <- prometheus.MustNewConstMetric(bufferedDesc, prometheus.GaugeValue, float64(l.Buffered), l.Level)
		ch <- prometheus.MustNewConstMetric(borrowedDesc, prometheus.GaugeValue, float64(l.Borrowed), l.Level)
		stuck := 0.0
		if l.Stuck != "" {
			stuck = 1
		}
		ch <- prometheus.MustNewConstMetric(stuckDesc, prometheus.GaugeValue, stuck, l.Level, l.StuckReason)
	}
	ch <- prometheus.MustNewConstMetric(budgetDesc, prometheus.GaugeValue, float64(s.cfg.Forwarder.RecordBudget()))
	cs := s.cfg.Forwarder.Commands()
	ch <- prometheus.MustNewConstMetric(commandsLiveDesc, prometheus.GaugeValue, float64(cs.Live))
	for result, n := range map[string]int64{"read": cs.Read, "invalid": cs.Invalid, "matched": cs.Matched, "unmatched": cs.Unmatched} {
		ch <- prometheus.MustNewConstMetric(commandsDesc, prometheus.CounterValue, float64(n), result)
	}
	if s.cfg.Scheduler != nil {
		collectSchedules(ch, s.cfg.Scheduler.Stats())
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	pending, err := s.pending(ctx, levels)
	if err != nil {
		// The other metrics still say a lot; an absent series is what an
		// alert on pending sees.
		ch <- prometheus.NewInvalidMetric(pendingDesc, err)
	}
	for _, l := range levels {
		if n, ok := pending[l.Level]; ok {
			ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), l.Level)
		}
	}
	rctx, rcancel := context.WithTimeout(context.Background(), readyTimeout)
	defer rcancel()
	ready := 0.0
	if s.ready(rctx) == nil {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(readyDesc, prometheus.GaugeValue, ready)
}

// collectSchedules sends the scheduler's figures.
func collectSchedules(ch chan<- prometheus.Metric, st schedule.Stats) {
	ch <- prometheus.MustNewConstMetric(schedulesDesc, prometheus.GaugeValue, float64(st.Schedules))
	if !st.Next.IsZero() {
		ch <- prometheus.MustNewConstMetric(scheduleNextDesc, prometheus.GaugeValue, float64(st.Next.UnixMilli())/1e3)
	}
	ch <- prometheus.MustNewConstMetric(scheduleOccurrencesDesc, prometheus.CounterValue, float64(st.Occurrences))
	ch <- prometheus.MustNewConstMetric(scheduleLateDesc, prometheus.CounterValue, float64(st.Late))
	ch <- prometheus.MustNewConstMetric(scheduleIndexDesc, prometheus.GaugeValue, float64(st.IndexBytes))
}
