package console

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/fleet"
	"github.com/kdelay/kdelay/kafkatest"
)

func TestLevels(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	// In the 1h level, in offset order as kdelay writes them: one already
	// moved on (committed), three leaving in 5 minutes, two in 50, and one
	// stamped ten minutes ahead by a skewed clock. Not further: Apache Kafka
	// 4 refuses a record stamped more than an hour ahead of its own clock
	// (log.message.timestamp.after.max.ms) with INVALID_TIMESTAMP, and the
	// console counts any record stamped after now as stamped ahead.
	f.hop("1h", "moved-on", f.now.Add(-58*time.Minute))
	for _, id := range []string{"a", "b", "c"} {
		f.hop("1h", id, f.now.Add(-55*time.Minute))
	}
	for _, id := range []string{"d", "e"} {
		f.hop("1h", id, f.now.Add(-10*time.Minute))
	}
	f.hop("1h", "ahead", f.now.Add(10*time.Minute))
	f.commit("1h", 1)
	// In the 1m level, two overdue by a minute.
	f.hop("1m", "late-1", f.now.Add(-2*time.Minute))
	f.hop("1m", "late-2", f.now.Add(-2*time.Minute))
	f.produce(&kgo.Record{Topic: f.topics.Ingress(), Value: []byte("new"), Timestamp: f.now})

	code, page := f.get("/")
	if code != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", code, page)
	}
	t.Run("the levels table counts what the groups have not committed", func(t *testing.T) {
		for level, want := range map[string]string{"ingress": "1", "1m": "2", "1h": "6"} {
			if got := pending(t, page, level); got != want {
				t.Errorf("%s pending %s, want %s", level, got, want)
			}
		}
	})
	t.Run("the departures place each record by its timestamp plus the level", func(t *testing.T) {
		tests := []struct {
			level string
			want  map[string]int64
		}{
			{"ingress", map[string]int64{"due now": 1}},
			{"1m", map[string]int64{"due now": 2, "≤ 1m": 0}},
			{"1h", map[string]int64{"due now": 0, "≤ 1m": 0, "≤ 10m": 3, "≤ 1h": 2, "stamped ahead": 1}},
		}
		for _, tt := range tests {
			got := departures(t, page, tt.level)
			for col, n := range tt.want {
				if got[col] != n {
					t.Errorf("%s: %d under %q, want %d (row %v)", tt.level, got[col], col, n, got)
				}
			}
		}
	})
	t.Run("the page says what a skewed clock does", func(t *testing.T) {
		if !strings.Contains(page, `<details id="skew">`) || !strings.Contains(page, "clock S ahead") {
			t.Errorf("the front page does not explain a producer's skewed clock")
		}
	})
	t.Run("the stylesheet is served", func(t *testing.T) {
		if code, css := f.get("/static/console.css"); code != http.StatusOK || !strings.Contains(css, "td.bar") {
			t.Errorf("GET /static/console.css: %d, %d bytes", code, len(css))
		}
	})
}

// deadLetter writes a dead letter as kdelay writes one for a record that
// failed at the ingress: the record's own headers, then kdelay-error and
// kdelay-source.
func (f *fixture) deadLetter(source, target, reason string) {
	f.t.Helper()
	f.produce(&kgo.Record{Topic: f.topics.DLQ(), Key: []byte("k"), Value: []byte("v"), Timestamp: f.now.Add(-time.Minute), Headers: []kgo.RecordHeader{
		{Key: kdelay.HeaderTarget, Value: []byte(target)}, {Key: kdelay.HeaderDelay, Value: []byte("0")},
		{Key: kdelay.HeaderError, Value: []byte(reason)}, {Key: kdelay.HeaderSource, Value: []byte(source)},
	}})
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	first, second := f.topics.Ingress()+"/0/7", f.topics.Ingress()+"/0/8"
	f.deadLetter(first, f.target, "topic does not exist")
	f.deadLetter(second, "other", "max.message.bytes exceeded")

	t.Run("the list filters by reason and target", func(t *testing.T) {
		_, page := f.get("/deadletters?reason=EXIST&target=" + url.QueryEscape(f.target))
		if !strings.Contains(page, `data-source="`+first+`"`) || strings.Contains(page, `data-source="`+second+`"`) || !strings.Contains(page, "2 dead letters in all; 1 match.") {
			t.Errorf("the filtered list shows:\n%s\nwant %s only, 1 of 2 matching", page, first)
		}
	})
	t.Run("a replay asks first, and writes nothing", func(t *testing.T) {
		code, page := f.post("/replay", url.Values{"source": {first}})
		if code != http.StatusOK || !strings.Contains(page, `id="confirm-replay"`) || !strings.Contains(page, `data-source="`+first+`"`) {
			t.Errorf("POST /replay without confirm: %d\n%s\nwant a confirmation naming %s", code, page, first)
		}
	})
	t.Run("a request from another site is refused", func(t *testing.T) {
		code, page := f.post("/replay", url.Values{"source": {first}, "confirm": {"yes"}}, "Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example")
		if code != http.StatusForbidden || !strings.Contains(page, "another site") {
			t.Errorf("cross-site POST /replay: %d\n%s\nwant 403 saying it came from another site", code, page)
		}
	})
	arrivals := f.cluster.Collect(f.topics.Ingress())
	t.Run("confirmed, it writes the chosen one to the ingress with its id", func(t *testing.T) {
		code, page := f.post("/replay", url.Values{"source": {first}, "confirm": {"yes"}})
		if code != http.StatusOK || !strings.Contains(page, "1 of 1 chosen dead letters were written") {
			t.Fatalf("POST /replay confirmed: %d\n%s", code, page)
		}
		got := arrivals.Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= 1 })
		if ids := kafkatest.IDs(got); len(got) != 1 || ids[first] != 1 {
			t.Errorf("the ingress holds %d records with ids %v, want 1 with id %s", len(got), ids, first)
		}
	})
}

// numberedDeadLetters writes 101 dead letters, dead-000 to dead-100, a
// second apart, on both partitions by turns; the odd ones failed for
// another reason.
func (f *fixture) numberedDeadLetters() {
	f.t.Helper()
	var rs []*kgo.Record
	for i := range defaultListed + 1 {
		reason := "even: topic does not exist"
		if i%2 == 1 {
			reason = "odd: max.message.bytes exceeded"
		}
		rs = append(rs, &kgo.Record{Topic: f.topics.DLQ(), Partition: int32(i % 2), Value: []byte("v"),
			Timestamp: f.now.Add(time.Duration(i-200) * time.Second), Headers: []kgo.RecordHeader{
				{Key: kdelay.HeaderTarget, Value: []byte(f.target)}, {Key: kdelay.HeaderDelay, Value: []byte("0")},
				{Key: kdelay.HeaderError, Value: []byte(reason)}, {Key: kdelay.HeaderSource, Value: []byte(fmt.Sprintf("dead-%03d", i))}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		f.t.Fatal(err)
	}
}

// listed are the sources a page lists, in its order.
func listed(page string) []string {
	var sources []string
	for _, m := range regexp.MustCompile(`<tr data-source="([^"]+)">`).FindAllStringSubmatch(page, -1) {
		sources = append(sources, m[1])
	}
	return sources
}

// TestReplayAllNewest: "replay all that match" chooses among the newest
// dead letters only, as many as the listing reads, and says so; once
// confirmed it replays those the page showed.
func TestReplayAllNewest(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.numberedDeadLetters()
	all := url.Values{"all": {"1"}, "reason": {"odd"}, "limit": {"10"}}
	want := []string{"dead-091", "dead-093", "dead-095", "dead-097", "dead-099"} // oldest first, as they go back
	code, page := f.post("/replay", all)
	if got := listed(page); code != http.StatusOK || !slices.Equal(got, want) {
		t.Fatalf("POST /replay all=1 reason=odd limit=10: %d, lists %v\n%s\nwant %v: those of the newest 10 that match", code, got, page, want)
	}
	for _, say := range []string{"101 dead letters in all; only the newest 10 were read, and 5 of them match: an older one is not replayed.",
		`href="deadletters?reason=odd&amp;target=&amp;limit=100"`} {
		if !strings.Contains(page, say) {
			t.Errorf("the confirmation does not say %q:\n%s", say, page)
		}
	}
	if code, page := f.post("/replay", url.Values{"all": {"1"}, "reason": {"odd"}, "limit": {"200"}}); code != http.StatusOK || len(listed(page)) != 50 ||
		!strings.Contains(page, "101 dead letters in all; all were read, and 50 of them match.") {
		t.Errorf("POST /replay all=1 reason=odd limit=200: %d\n%s\nwant the 50 odd ones, all read", code, page)
	}
	shown := regexp.MustCompile(`<input type="hidden" name="shown" value="([^"]+)">`).FindAllStringSubmatch(page, -1)
	if len(shown) != len(want) {
		t.Fatalf("the confirmation carries %d shown sources, want %d:\n%s", len(shown), len(want), page)
	}
	arrivals := f.cluster.Collect(f.topics.Ingress())
	confirm := url.Values{"all": {"1"}, "reason": {"odd"}, "limit": {"10"}, "confirm": {"yes"}}
	for _, m := range shown {
		confirm.Add("shown", m[1])
	}
	if code, page := f.post("/replay", confirm); code != http.StatusOK || !strings.Contains(page, "5 of 5 chosen dead letters were written") {
		t.Fatalf("POST /replay confirmed: %d\n%s\nwant the 5 written", code, page)
	}
	got := arrivals.Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= len(want) })
	if ids := kafkatest.IDs(got); len(got) != len(want) || !slices.Equal(slices.Sorted(maps.Keys(ids)), want) {
		t.Errorf("the ingress holds %d records with ids %v, want one each of %v", len(got), ids, want)
	}
}

// TestReplayAllShownOnly: a confirmed "replay all that match" replays
// what its page showed or nothing: once newer dead letters have pushed
// those shown out of the newest, it refuses, and writes nothing.
func TestReplayAllShownOnly(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.numberedDeadLetters()
	_, page := f.post("/replay", url.Values{"all": {"1"}, "reason": {"odd"}, "limit": {"10"}})
	confirm := url.Values{"all": {"1"}, "reason": {"odd"}, "limit": {"10"}, "confirm": {"yes"}}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="shown" value="([^"]+)">`).FindAllStringSubmatch(page, -1) {
		confirm.Add("shown", m[1])
	}
	for i := range 10 {
		f.deadLetter(fmt.Sprintf("new-%d", i), f.target, "odd: newer")
	}
	arrivals := f.cluster.Collect(f.topics.Ingress())
	code, page := f.post("/replay", confirm)
	if want := "no dead letter among the newest 10 in " + f.topics.DLQ() + " has source dead-091, dead-093, dead-095, dead-097, dead-099"; code != http.StatusConflict || !strings.Contains(page, want) {
		t.Errorf("POST /replay confirmed after newer dead letters: %d\n%s\nwant 409 saying %q", code, page, want)
	}
	// Settled: nothing arrives within a second of the refusal.
	if got := arrivals.Until(time.Second, func(got []kafkatest.Arrival) bool { return len(got) > 0 }); len(got) != 0 {
		t.Errorf("the ingress holds %d records, want none", len(got))
	}
}

// TestReplaySelectedNewest: "replay selected" finds the ticked dead letters
// among the newest the listing read, without reading the whole topic; one
// that is not among them is refused, and nothing is replayed.
func TestReplaySelectedNewest(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.numberedDeadLetters()
	if code, page := f.post("/replay", url.Values{"source": {"dead-100"}, "limit": {"10"}}); code != http.StatusOK || !slices.Equal(listed(page), []string{"dead-100"}) {
		t.Errorf("POST /replay source=dead-100 limit=10: %d\n%s\nwant a confirmation of dead-100", code, page)
	}
	code, page := f.post("/replay", url.Values{"source": {"dead-100", "dead-000"}, "limit": {"10"}})
	if want := "no dead letter among the newest 10 in " + f.topics.DLQ() + " has source dead-000"; code != http.StatusConflict || !strings.Contains(page, want) {
		t.Errorf("POST /replay source=dead-100,dead-000 limit=10: %d\n%s\nwant 409 saying %q", code, page, want)
	}
}

// TestDeadLettersNewest: the dead letters page reads the newest only, of
// every partition, and says how many there are in all.
func TestDeadLettersNewest(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	f.numberedDeadLetters()
	tests := []struct {
		name, query string
		first, last string // of the list, newest first
		n           int
		count       string // what the page says
	}{
		{"the newest 100 by default", "", "dead-100", "dead-001", 100, "101 dead letters in all; only the newest 100 are read and listed."},
		{"the newest of both partitions, as many as the limit asks", "?limit=3", "dead-100", "dead-098", 3, "101 dead letters in all; only the newest 3 are read and listed."},
		{"a filter picks among the newest", "?limit=3&reason=odd", "dead-099", "dead-099", 1, "101 dead letters in all; only the newest 3 are read, and 1 of them match."},
		{"all, when the limit reaches them", "?limit=200", "dead-100", "dead-000", 101, "101 dead letters in all."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, page := f.get("/deadletters" + tt.query)
			got := listed(page)
			if code != http.StatusOK || len(got) != tt.n || got[0] != tt.first || got[len(got)-1] != tt.last {
				t.Fatalf("GET /deadletters%s: %d, lists %v\nwant %d from %s to %s", tt.query, code, got, tt.n, tt.first, tt.last)
			}
			if !slices.IsSortedFunc(got, func(a, b string) int { return strings.Compare(b, a) }) {
				t.Errorf("GET /deadletters%s lists %v, want the newest first", tt.query, got)
			}
			if !strings.Contains(page, tt.count) {
				t.Errorf("GET /deadletters%s does not say %q:\n%s", tt.query, tt.count, page)
			}
		})
	}
	t.Run("a link reads more", func(t *testing.T) {
		if _, page := f.get("/deadletters?limit=3&reason=odd"); !strings.Contains(page, `href="deadletters?reason=odd&amp;target=&amp;limit=30"`) {
			t.Errorf("the page of the newest 3 has no link to the newest 30, filtered alike:\n%s", page)
		}
	})
	t.Run("a limit that is no count is refused", func(t *testing.T) {
		for _, l := range []string{"0", "-1", "many", "10001"} {
			if code, page := f.get("/deadletters?limit=" + l); code != http.StatusBadRequest || !strings.Contains(page, "from 1 to 10000") {
				t.Errorf("GET /deadletters?limit=%s: %d\n%s\nwant 400 saying the range", l, code, page)
			}
		}
	})
}

// TestDeadLettersTransactional: in an exactly-once fleet kdelay writes dead
// letters in transactions, so a partition of the DLQ ends with a marker no
// record stands for, and holds the dead letters of aborted transactions,
// which were never written as far as a reader is concerned.
func TestDeadLettersTransactional(t *testing.T) {
	t.Parallel()
	f := setup(t, false)
	cl := f.cluster.Client(kgo.TransactionalID(kafkatest.Name(t)), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, source := range []string{"committed", "aborted"} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		r := &kgo.Record{Topic: f.topics.DLQ(), Value: []byte("v"), Timestamp: f.now, Headers: []kgo.RecordHeader{
			{Key: kdelay.HeaderTarget, Value: []byte(f.target)}, {Key: kdelay.HeaderDelay, Value: []byte("0")},
			{Key: kdelay.HeaderError, Value: []byte("topic does not exist")}, {Key: kdelay.HeaderSource, Value: []byte(source)}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(source == "committed")); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	code, page := f.get("/deadletters")
	took := time.Since(start)
	if code != http.StatusOK || took > 5*time.Second {
		t.Fatalf("GET /deadletters: %d after %s\n%s\nwant the page at once: a partition that ends with a marker has ended", code, took, page)
	}
	if !strings.Contains(page, `data-source="committed"`) || strings.Contains(page, `data-source="aborted"`) {
		t.Errorf("the page lists:\n%s\nwant the committed dead letter, not the aborted one", page)
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	const help = "Start it with console-actions: true."
	f := setup(t, false, func(c *Config) { c.ActionsHelp = help })
	f.deadLetter(f.topics.Ingress()+"/0/1", f.target, "topic does not exist")
	f.hop("1h", "order-7", f.now.Add(-time.Minute))
	t.Run("no page offers an action or carries a token", func(t *testing.T) {
		for _, path := range []string{"/deadletters", "/find?id=order-7"} {
			if _, page := f.get(path); strings.Contains(page, `method="post"`) || strings.Contains(page, `name="csrf"`) {
				t.Errorf("GET %s on a read-only console offers an action:\n%s", path, page)
			}
		}
	})
	t.Run("an action is refused, saying what turns actions on", func(t *testing.T) {
		for _, path := range []string{"/replay", "/command"} {
			code, page := f.post(path, url.Values{"all": {"1"}, "name": {"cancel"}, "id": {"x"}, "confirm": {"yes"}})
			if code != http.StatusForbidden || !strings.Contains(page, "read-only") || !strings.Contains(page, help) {
				t.Errorf("POST %s on a read-only console: %d\n%s\nwant 403 saying it is read-only and %q", path, code, page, help)
			}
		}
	})
}

func TestCSRF(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.hop("1h", "order-7", f.now.Add(-time.Minute))
	control := f.cluster.Collect(f.topics.Control())
	cancel := url.Values{"name": {"cancel"}, "id": {"order-7"}, "confirm": {"yes"}}
	t.Run("every action's form carries the token", func(t *testing.T) {
		_, page := f.get("/find?id=order-7")
		forms, tokens := strings.Count(page, `<form method="post"`), strings.Count(page, `name="csrf" value="`+f.console.token("")+`"`)
		if forms != 3 || tokens != forms {
			t.Errorf("the find page has %d forms that post and %d tokens, want 3 of each:\n%s", forms, tokens, page)
		}
	})
	tests := []struct {
		name, token string
	}{
		{"without a token", ""},
		{"with a token of another process", otherProcessToken(t, f)},
		{"with another user's token", f.console.token("alice")},
	}
	for _, tt := range tests {
		t.Run("an action "+tt.name+" is refused and writes nothing", func(t *testing.T) {
			form := maps.Clone(cancel)
			form.Set(csrfField, tt.token)
			if code, page := f.post("/command", form); code != http.StatusForbidden || !strings.Contains(page, "CSRF token") {
				t.Errorf("POST /command %s: %d\n%s\nwant 403 naming the CSRF token", tt.name, code, page)
			}
		})
	}
	t.Run("with the token, it is written", func(t *testing.T) {
		if code, page := f.post("/command", cancel); code != http.StatusOK || !strings.Contains(page, "Written to ") {
			t.Fatalf("POST /command with the token: %d\n%s", code, page)
		}
		got := control.Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= 1 })
		if len(got) != 1 {
			t.Errorf("the control topic holds %d records, want the one cancel with a token; those refused wrote nothing", len(got))
		}
	})
}

// otherProcessToken is the token another Console on the same fleet gives its forms:
// another process's, made with another secret.
func otherProcessToken(t *testing.T, f *fixture) string {
	t.Helper()
	c, err := New(Config{Fleet: f.fleet, Actions: true})
	if err != nil {
		t.Fatal(err)
	}
	return c.token("")
}

func TestFind(t *testing.T) {
	t.Parallel()
	f := setup(t, true)
	f.hop("1h", "other", f.now.Add(-time.Minute))
	r := f.hop("1h", "order-7", f.now.Add(-time.Minute))
	place := kdelay.Source(r.Topic, r.Partition, r.Offset)

	t.Run("it says where the message waits and what it searched", func(t *testing.T) {
		_, page := f.get("/find?id=order-7")
		if !strings.Contains(page, "<td>"+place+"</td>") || !strings.Contains(page, "Every pending record was read") || !strings.Contains(page, "No command is in force") {
			t.Errorf("find order-7:\n%s\nwant it at %s, a complete search, no command", page, place)
		}
		if !strings.Contains(page, "Searched 2 of 2 records") {
			t.Errorf("find order-7 does not say it searched the 2 pending records:\n%s", page)
		}
	})
	t.Run("a number without a unit is refused", func(t *testing.T) {
		code, page := f.post("/command", url.Values{"name": {"reschedule"}, "id": {"order-7"}, "delay": {"30"}})
		if code != http.StatusBadRequest || !strings.Contains(page, "delay 30 has no unit") {
			t.Errorf("reschedule with delay 30: %d\n%s\nwant 400 saying it has no unit", code, page)
		}
	})
	t.Run("a cancel asks, then is written and in force", func(t *testing.T) {
		if _, page := f.post("/command", url.Values{"name": {"cancel"}, "id": {"order-7"}}); !strings.Contains(page, `id="confirm-command"`) {
			t.Fatalf("POST /command without confirm:\n%s\nwant a confirmation", page)
		}
		control := f.cluster.Collect(f.topics.Control())
		if code, page := f.post("/command", url.Values{"name": {"cancel"}, "id": {"order-7"}, "confirm": {"yes"}}); code != http.StatusOK || !strings.Contains(page, "Written to "+f.topics.Control()) {
			t.Fatalf("POST /command confirmed: %d\n%s", code, page)
		}
		got := control.Until(10*time.Second, func(got []kafkatest.Arrival) bool { return len(got) >= 1 })
		if len(got) != 1 || string(got[0].Record.Key) != "order-7" {
			t.Fatalf("the control topic holds %d records, want the cancel of order-7", len(got))
		}
		if c, err := kdelay.ParseCommand(got[0].Record.Timestamp, got[0].Record.Key, got[0].Record.Headers, kdelay.Rules{}); err != nil || c.Name != kdelay.CommandCancel {
			t.Errorf("the control record reads as %+v, %v; want a cancel", c, err)
		}
		if _, page := f.get("/find?id=order-7"); !strings.Contains(page, "In force: <strong>cancel</strong>") {
			t.Errorf("find after the cancel:\n%s\nwant the cancel in force", page)
		}
	})
	t.Run("a search stops at its byte limit and says so", func(t *testing.T) {
		c, err := New(Config{Fleet: f.fleet, FindLimits: fleet.FindLimits{MaxBytes: 1}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(c)
		defer srv.Close()
		resp, err := http.Get(srv.URL + "/find?id=nothing")
		if err != nil {
			t.Fatal(err)
		}
		_, page := read(t, resp)
		if !strings.Contains(page, "Stopped by the 1 B limit") {
			t.Errorf("a search bounded to 1 byte:\n%s\nwant it stopped by that limit", page)
		}
	})
}
