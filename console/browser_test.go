package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/admin"
	"github.com/kdelay/kdelay/fleet"
	"github.com/kdelay/kdelay/forwarder"
	"github.com/kdelay/kdelay/forwarder/forwardertest"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
	"github.com/kdelay/kdelay/schedule"
)

// EnvScreenshots names a directory the browser test saves a screenshot of
// each page into: docs/console does, for docs/CONSOLE.md.
const EnvScreenshots = "KDELAY_CONSOLE_SCREENSHOTS"

// browserDelay is how long the message the test cancels waits: long enough
// for the browser to find and cancel it before it is due.
const browserDelay = 30 * time.Second

// browserSecret is the bearer token the browser signs in with.
const browserSecret = "Jx8kq2Vb0pXw7sLr4NcT1yZe"

// TestBrowser uses the console as a person does, in headless Chromium driven
// over the DevTools protocol, against a forwarder on the test broker with
// records pending in two levels and a dead letter, and a console that asks
// for credentials: without them a page is refused; with them the levels
// table and the departures show the counts written, the dead letter is
// listed, a schedule is listed with its next occurrence, an action whose
// form lost its CSRF token is refused, a message found by its id and
// cancelled from the page is not delivered, while its twin due at the same
// time is, and the dead letter replayed from the page is back in the
// ingress.
func TestBrowser(t *testing.T) {
	t.Parallel()
	chromium := findChromium()
	if chromium == "" {
		t.Skip("no chromium on PATH: install it (apt-get install -y chromium) to run the browser test")
	}
	b := setupBrowser(t)
	for i := range 3 {
		b.send("later-"+string(rune('a'+i)), time.Hour)
	}
	b.send("cancel-me", browserDelay)
	b.send("keep-me", browserDelay)
	deadSource := b.topics.Ingress() + "/0/99"
	b.produce(&kgo.Record{Topic: b.topics.DLQ(), Value: []byte("dead"), Headers: []kgo.RecordHeader{
		{Key: kdelay.HeaderTarget, Value: []byte("gone")}, {Key: kdelay.HeaderDelay, Value: []byte("0")},
		{Key: kdelay.HeaderError, Value: []byte(`topic "gone" does not exist`)}, {Key: kdelay.HeaderSource, Value: []byte(deadSource)},
	}})
	hourly, _, err := schedule.Record(b.fleet.Config().Rules(), "hourly",
		kdelay.ScheduleFields{Spec: "@every 1h", TimeZone: "Europe/Berlin", Target: b.target}, []byte("v"), nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.produce(hourly)
	hourlyNext := hourly.Timestamp.Add(time.Hour).Truncate(time.Second) // @every counts from the record's timestamp
	// The ingress routes the three into the 1h level and commits within
	// its commit interval: then the page has the counts to show.
	b.waitPending("1h", 3)
	arrivals := b.cluster.Collect(b.target)

	ctx := browser(t, chromium)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	attr := func(sel, name string) string {
		t.Helper()
		a, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		if err != nil {
			t.Fatalf("%s of %s: %v", name, sel, err)
		}
		return a.Value
	}

	t.Run("a page without credentials is refused", func(t *testing.T) {
		// Headless Chromium has no sign-in dialog: it ends a load that
		// asks for basic auth with ERR_INVALID_AUTH_CREDENTIALS.
		resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(b.srv.URL+"/"))
		refused := (err != nil && strings.Contains(err.Error(), "ERR_INVALID_AUTH_CREDENTIALS")) || (err == nil && resp.Status == http.StatusUnauthorized)
		if !refused {
			t.Fatalf("GET / without credentials: %v, %v; want 401, or the load ended for want of credentials", resp, err)
		}
	})
	_, err = chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + browserSecret}})
	if err != nil {
		t.Fatalf("sign the browser in: %v", err)
	}
	do("the levels page", chromedp.Navigate(b.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#departures`)))
	b.screenshot(ctx, "levels")
	t.Run("the levels table and the departures count the three records of the 1h level", func(t *testing.T) {
		pending, within, ahead := text(`#levels tr[data-level="1h"] td.pending`),
			attr(`#departures tr[data-level="1h"] td[data-column="≤ 1h"]`, "data-records"),
			attr(`#departures tr[data-level="1h"] td[data-column="stamped ahead"]`, "data-records")
		if pending != "3" || within != "3" || ahead != "0" {
			t.Errorf("1h: pending %q, leaving within the hour %q, stamped ahead %q; want 3, 3, 0", pending, within, ahead)
		}
	})
	do("the dead letters page", chromedp.Navigate(b.srv.URL+"/deadletters"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-source="`+deadSource+`"]`)))
	b.screenshot(ctx, "deadletters")
	t.Run("the dead letter is listed", func(t *testing.T) {
		if count := text(`#count`); count != "1 dead letter in all." {
			t.Errorf("dead letters page says %q, want 1 in all", count)
		}
	})
	do("the schedules page", chromedp.Navigate(b.srv.URL+"/schedules"), chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-id="hourly"]`)))
	t.Run("the schedule is listed with its next occurrence", func(t *testing.T) {
		row := text(`#schedules tr[data-id="hourly"]`)
		for _, want := range []string{"@every 1h", "Europe/Berlin", b.target, hourlyNext.UTC().Format(fleet.TimeFormat)} {
			if !strings.Contains(row, want) {
				t.Errorf("the row of hourly reads %q, want %q in it", row, want)
			}
		}
	})
	do("find cancel-me", chromedp.Navigate(b.srv.URL+"/find"),
		chromedp.SendKeys(chromedp.CSS(`#find input[name=id]`), "cancel-me"), chromedp.Submit(chromedp.CSS(`#find input[name=id]`)),
		chromedp.WaitVisible(chromedp.CSS(`#search-done`)))
	b.screenshot(ctx, "find")
	t.Run("find says where the message waits", func(t *testing.T) {
		if found := text(`#search-done`); !strings.Contains(found, b.topics.Level("")) || !strings.Contains(found, "Every pending record was read") {
			t.Errorf("find cancel-me shows:\n%s\nwant a place in a level and a complete search", found)
		}
	})
	t.Run("an action whose form lost its CSRF token is refused", func(t *testing.T) {
		// As a form another page made would arrive, were it sent from the
		// same site: everything but the token.
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.querySelector('#cancel').form.elements.csrf.value = '', true)`)); err != nil {
			t.Fatal(err)
		}
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`#cancel`)))
		if err != nil || resp.Status != http.StatusForbidden {
			t.Fatalf("cancel without the token: %v, %v; want 403", resp, err)
		}
		if msg := text(`#error`); !strings.Contains(msg, "CSRF token") {
			t.Errorf("cancel without the token says %q, want the CSRF token named", msg)
		}
	})
	do("find cancel-me again", chromedp.Navigate(b.srv.URL+"/find?id=cancel-me"), chromedp.WaitVisible(chromedp.CSS(`#search-done`)))
	do("cancel it", chromedp.Click(chromedp.CSS(`#cancel`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-command`)),
		chromedp.Click(chromedp.CSS(`#confirm-command`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	b.screenshot(ctx, "cancelled")
	if result := text(`#result`); !strings.Contains(result, "Written to "+b.topics.Control()) {
		t.Fatalf("the cancel page says %q, want it written to %s", result, b.topics.Control())
	}
	t.Run("the cancelled message is not delivered, its twin is", func(t *testing.T) {
		// keep-me is due with cancel-me; once both left their level (its
		// group committed them), cancel-me would have arrived by now.
		got := arrivals.Until(browserDelay+30*time.Second, func(got []kafkatest.Arrival) bool { return kafkatest.Values(got)["keep-me"] > 0 })
		if kafkatest.Values(got)["keep-me"] == 0 {
			t.Fatalf("keep-me did not arrive within %s", browserDelay+30*time.Second)
		}
		b.waitPending("10s", 0)
		b.waitPending("1s", 0)
		if n := kafkatest.Values(arrivals.Arrivals())["cancel-me"]; n != 0 {
			t.Errorf("cancel-me was delivered %d times after the cancel clicked in the browser, want never", n)
		}
	})
	// The forwarder counts keep-me when its acknowledgement is handled,
	// which may be after the target's consumer read it.
	b.waitDelivered(1)
	do("the live page", chromedp.Navigate(b.srv.URL+"/live"), chromedp.WaitVisible(chromedp.CSS(`#live`)))
	b.screenshot(ctx, "live")
	t.Run("the live page counts keep-me, the one record delivered", func(t *testing.T) {
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll('#live td.start-records')].reduce((n, td) => n + Number(td.textContent), 0)`))
		if err != nil || n != 1 {
			t.Errorf("the live page says its levels delivered %d records (%v), want 1: keep-me", n, err)
		}
	})
	// Last: the replayed record goes through the forwarder again.
	do("replay the dead letter", chromedp.Navigate(b.srv.URL+"/deadletters"),
		chromedp.Click(chromedp.CSS(`tr[data-source="`+deadSource+`"] input[type=checkbox]`)),
		chromedp.Click(chromedp.CSS(`#replay-selected`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-replay`)),
		chromedp.Click(chromedp.CSS(`#confirm-replay`)), chromedp.WaitVisible(chromedp.CSS(`#result`)))
	t.Run("the dead letter replayed from the page is back in the ingress", func(t *testing.T) {
		if result := text(`#result`); !strings.HasPrefix(result, "1 of 1 ") {
			t.Errorf("the replay page says %q, want 1 of 1 written to the ingress", result)
		}
		ingress := b.cluster.Collect(b.topics.Ingress())
		got := ingress.Until(10*time.Second, func(got []kafkatest.Arrival) bool { return kafkatest.Values(got)["dead"] > 0 })
		if n := kafkatest.Values(got)["dead"]; n != 1 {
			t.Errorf("the ingress holds the replayed dead letter %d times, want once", n)
		}
	})
}

// findChromium is the path of a Chromium to drive, "" when there is none.
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// browser starts headless Chromium for the test, closed when it ends.
func browser(t *testing.T, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	// The first Run starts the browser, which lives as long as that
	// call's context: no timeout on it, the test's own deadline bounds it.
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return ctx
}

// browserFixture is a forwarder, consuming, and a console with actions on,
// that asks for browserSecret and shows the forwarder's metrics.
type browserFixture struct {
	*fixture
	metrics *admin.Metrics
}

func setupBrowser(t *testing.T) browserFixture {
	t.Helper()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	set, err := levels.Parse([]string{"1s", "10s", "1h"})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, cluster: cluster, topics: kdelay.Topics{Prefix: name}, group: name, target: name + ".target", now: time.Now()}
	cluster.CreateTopic(f.target, 1, nil)
	cluster.CreateTopic(f.topics.Schedules(), 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}) // as serve creates it
	metrics := admin.NewMetrics()
	forwardertest.Serve(t, forwarder.Config{Brokers: cluster.Brokers, Topics: f.topics, Levels: set, Group: name,
		Partitions: 1, ShutdownTimeout: 2 * time.Second, Observer: metrics})
	f.cl = cluster.Client()
	f.fleet, err = fleet.New(fleet.Config{Brokers: cluster.Brokers, Topics: f.topics, Group: name, Levels: set})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.fleet.Close)
	c, err := New(Config{Fleet: f.fleet, Actions: true, Credentials: []Credential{{Name: "operator", Secret: browserSecret}}, Live: metrics})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(c)
	t.Cleanup(f.srv.Close)
	b := browserFixture{f, metrics}
	b.waitConsuming()
	return b
}

// send writes a record to the ingress as a producer does: for the target,
// after delay, with id as its kdelay-id and its value.
func (b browserFixture) send(id string, delay time.Duration) {
	b.t.Helper()
	b.produce(&kgo.Record{Topic: b.topics.Ingress(), Value: []byte(id), Headers: []kgo.RecordHeader{
		{Key: kdelay.HeaderTarget, Value: []byte(b.target)}, {Key: kdelay.HeaderDelay, Value: []byte(delay.String())},
		{Key: kdelay.HeaderID, Value: []byte(id)},
	}})
}

// waitPending waits until level holds n pending records, as the console's
// own reading of Kafka counts them.
func (b browserFixture) waitPending(level string, n int64) {
	b.t.Helper()
	b.waitStatus(fmt.Sprintf("level %s did not reach %d pending", level, n), func(st []fleet.LevelStatus) bool {
		return slices.ContainsFunc(st, func(s fleet.LevelStatus) bool { return s.Level == level && s.Pending == n })
	})
}

// waitConsuming waits until the group of every stage is Stable with a
// member, as the console's own reading of Kafka sees them. A record written
// before the ingress consumes is routed late, and one routed more than the
// forwarder's maxHopAge after its timestamp is planned from then (hopBase):
// a delay of exactly 1h would take the 10s level, not 1h. On a real broker
// the groups join some seconds after the forwarder is ready.
func (b browserFixture) waitConsuming() {
	b.t.Helper()
	b.waitStatus("the groups did not all become Stable with a member", func(st []fleet.LevelStatus) bool {
		return len(st) > 0 && !slices.ContainsFunc(st, func(s fleet.LevelStatus) bool { return s.State != "Stable" || s.Members == 0 })
	})
}

// waitStatus polls the fleet's status until ok holds for it, and fails the
// test with what and the last status if it does not within 30s.
func (b browserFixture) waitStatus(what string, ok func([]fleet.LevelStatus) bool) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last []fleet.LevelStatus
	var err error
	for time.Now().Before(deadline) {
		last, err = b.fleet.Status(context.Background(), time.Now(), nil)
		if err == nil && ok(last) {
			return
		}
		select {
		case <-time.After(100 * time.Millisecond): // a deadline-bounded poll
		case <-b.t.Context().Done():
			return
		}
	}
	b.t.Fatalf("%s within 30s: %v %+v", what, err, last)
}

// waitDelivered waits until the forwarder has counted n deliveries.
func (b browserFixture) waitDelivered(n uint64) {
	b.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got uint64
	for time.Now().Before(deadline) {
		got = 0
		for _, d := range b.metrics.Deliveries() {
			got += d.Records
		}
		if got >= n {
			return
		}
		select {
		case <-time.After(50 * time.Millisecond): // a deadline-bounded poll
		case <-b.t.Context().Done():
			return
		}
	}
	b.t.Fatalf("the forwarder counted %d deliveries within 10s, want %d", got, n)
}

// screenshot saves the page shown as <name>.png in the directory
// EnvScreenshots names, if it names one.
func (b browserFixture) screenshot(ctx context.Context, name string) {
	b.t.Helper()
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
	}
}
