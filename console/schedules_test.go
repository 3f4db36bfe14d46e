package console

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/fleet"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/schedule"
)

// schedules writes two schedules in force and one record kdelay refuses to
// the schedules topic, as kdelay schedule create and a producer would, and
// returns the hourly one's record.
func (f *fixture) schedules() *kgo.Record {
	f.t.Helper()
	rules := f.fleet.Config().Rules()
	hourly, _, err := schedule.Record(rules, "hourly", kdelay.ScheduleFields{Spec: "@every 1h", TimeZone: "Europe/Berlin", Target: f.target}, []byte("v"), nil, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	daily, _, err := schedule.Record(rules, "daily", kdelay.ScheduleFields{Spec: "0 30 2 * * *", Target: f.target}, []byte("v"), nil, f.now)
	if err != nil {
		f.t.Fatal(err)
	}
	f.produce(hourly)
	f.produce(daily)
	f.produce(&kgo.Record{Topic: f.topics.Schedules(), Key: []byte("no-target"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: kdelay.HeaderSchedule, Value: []byte("@every 1h")}}})
	return hourly
}

// scheduleRow is the row for id of the page's table (schedules or refused),
// "" when there is none.
func scheduleRow(page, table, id string) string {
	t := regexp.MustCompile(`(?s)<table id="` + table + `">.*?</table>`).FindString(page)
	m := regexp.MustCompile(`(?s)<tr data-id="` + regexp.QuoteMeta(id) + `">.*?</tr>`).FindString(t)
	return m
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	var log logs
	f := setup(t, true, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	hourly := f.schedules()
	// @every counts from the record's timestamp, and occurrences fall on
	// the second.
	next := hourly.Timestamp.Add(time.Hour).Truncate(time.Second)

	code, page := f.get("/schedules")
	if code != http.StatusOK {
		t.Fatalf("GET /schedules: %d\n%s", code, page)
	}
	t.Run("each schedule in force with its cron, zone, target and next occurrence", func(t *testing.T) {
		row := scheduleRow(page, "schedules", "hourly")
		for _, want := range []string{"<code>@every 1h</code>", "<td>Europe/Berlin</td>", "<td>" + f.target + "</td>",
			`<td class="next">` + next.UTC().Format(fleet.TimeFormat) + " (due in ", `<td class="n count">0</td>`} {
			if !strings.Contains(row, want) {
				t.Errorf("the row of hourly does not hold %q:\n%s", want, row)
			}
		}
		if row := scheduleRow(page, "schedules", "daily"); !strings.Contains(row, "<td>UTC</td>") {
			t.Errorf("daily is not listed in UTC:\n%s", page)
		}
	})
	t.Run("a refused record apart, with why", func(t *testing.T) {
		if scheduleRow(page, "schedules", "no-target") != "" || !strings.Contains(scheduleRow(page, "refused", "no-target"), "target") {
			t.Errorf("no-target is not listed apart as refused, for its missing target:\n%s", page)
		}
		if !strings.Contains(page, "2 schedules in force; 1 record refused.") {
			t.Errorf("the page does not count 2 in force and 1 refused:\n%s", page)
		}
	})
	t.Run("a delete asks first, showing the schedule", func(t *testing.T) {
		code, page := f.post("/delete-schedule", url.Values{"id": {"hourly"}})
		if code != http.StatusOK || !strings.Contains(page, `id="confirm-delete"`) || !strings.Contains(page, "<code>@every 1h</code> in Europe/Berlin") {
			t.Errorf("POST /delete-schedule without confirm: %d\n%s\nwant a confirmation showing hourly", code, page)
		}
	})
	t.Run("a delete without the CSRF token is refused", func(t *testing.T) {
		code, page := f.post("/delete-schedule", url.Values{"id": {"hourly"}, "confirm": {"yes"}, csrfField: {"forged"}})
		if code != http.StatusForbidden || !strings.Contains(page, "CSRF token") {
			t.Errorf("POST /delete-schedule with a forged token: %d\n%s\nwant 403 for the token", code, page)
		}
	})
	t.Run("confirmed, it writes the tombstone, logs who did, and the schedule is no longer listed", func(t *testing.T) {
		arrivals := f.cluster.Collect(f.topics.Schedules(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		code, page := f.post("/delete-schedule", url.Values{"id": {"hourly"}, "confirm": {"yes"}})
		if code != http.StatusOK || !strings.Contains(page, "Tombstone written to "+f.topics.Schedules()+"/0/") {
			t.Fatalf("POST /delete-schedule confirmed: %d\n%s", code, page)
		}
		tombstone := func(got []kafkatest.Arrival) bool {
			for _, a := range got {
				if string(a.Record.Key) == "hourly" && a.Record.Value == nil {
					return true
				}
			}
			return false
		}
		if got := arrivals.Until(10*time.Second, tombstone); !tombstone(got) {
			t.Errorf("the schedules topic holds %d records, and no tombstone keyed hourly", len(got))
		}
		if !regexp.MustCompile(`msg=console_schedule_delete id=hourly user="" remote=127\.0\.0\.1:\d+ written=` + regexp.QuoteMeta(f.topics.Schedules()) + `/0/\d+`).MatchString(log.String()) {
			t.Errorf("the log does not say who deleted hourly, from where, and where the tombstone went:\n%s", log.String())
		}
		_, page = f.get("/schedules")
		if scheduleRow(page, "schedules", "hourly") != "" || scheduleRow(page, "schedules", "daily") == "" {
			t.Errorf("after the delete the page lists:\n%s\nwant daily and not hourly", page)
		}
	})
}

func TestSchedulesReadOnly(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	f.schedules()
	_, page := f.get("/schedules")
	if scheduleRow(page, "schedules", "hourly") == "" || strings.Contains(page, "delete-schedule") {
		t.Errorf("a read-only console's page:\n%s\nwant hourly listed, and no delete form", page)
	}
	code, page := f.post("/delete-schedule", url.Values{"id": {"hourly"}, "confirm": {"yes"}})
	if code != http.StatusForbidden || !strings.Contains(page, "read-only") {
		t.Errorf("POST /delete-schedule on a read-only console: %d\n%s\nwant 403, read-only", code, page)
	}
	if _, page := f.get("/schedules"); scheduleRow(page, "schedules", "hourly") == "" {
		t.Errorf("hourly is gone after a refused delete:\n%s", page)
	}
}

// TestSchedulesPages: the page lists the first schedules by id, and a link
// to those after the last it lists; the count is of all of them. The
// console runs inside kdelay serve, so a page holds a page of schedules,
// not all.
func TestSchedulesPages(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	rules := f.fleet.Config().Rules()
	const n = schedulesPerPage + 1
	var rs []*kgo.Record
	for i := range n {
		r, _, err := schedule.Record(rules, fmt.Sprintf("s%04d", i), kdelay.ScheduleFields{Spec: "@daily", Target: f.target}, []byte("v"), nil, f.now)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("write %d schedules: %v", n, err)
	}

	_, page := f.get("/schedules")
	last := fmt.Sprintf("s%04d", n-2)
	if !strings.Contains(page, fmt.Sprintf("%d schedules in force.", n)) || scheduleRow(page, "schedules", last) == "" ||
		scheduleRow(page, "schedules", fmt.Sprintf("s%04d", n-1)) != "" || !strings.Contains(page, `<a href="schedules?after=`+last+`">Next page</a>`) {
		t.Fatalf("the first page:\n%s\nwant %d counted, s0000 to %s listed, and a link to those after %s", page, n, last, last)
	}
	_, page = f.get("/schedules?after=" + last)
	if scheduleRow(page, "schedules", fmt.Sprintf("s%04d", n-1)) == "" || scheduleRow(page, "schedules", last) != "" || strings.Contains(page, "Next page") ||
		!strings.Contains(page, `<a href="schedules">First page</a>`) {
		t.Errorf("the page after %s:\n%s\nwant the last schedule alone, a link to the first page and none further", last, page)
	}
}
