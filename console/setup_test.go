package console

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/fleet"
	"github.com/kdelay/kdelay/kafkatest"
	"github.com/kdelay/kdelay/levels"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fixture is a broker with a fleet's topics, and a console on it behind an
// HTTP server. No forwarder runs: the tests write the records a fleet would
// hold, so they know the counts to expect.
type fixture struct {
	t       *testing.T
	cluster *kafkatest.Cluster
	cl      *kgo.Client
	fleet   *fleet.Fleet
	topics  kdelay.Topics
	group   string
	target  string
	console *Console
	srv     *httptest.Server
	now     time.Time
}

// setup makes the fixture; each of with changes the console's Config.
func setup(t *testing.T, actions bool, with ...func(*Config)) *fixture {
	t.Helper()
	cluster := kafkatest.New(t)
	name := kafkatest.Name(t)
	cluster.DeleteOnCleanup(name)
	f := &fixture{t: t, cluster: cluster, topics: kdelay.Topics{Prefix: name}, group: name, target: name + ".target", now: time.Now()}
	set, err := levels.Parse([]string{"1m", "1h"})
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{f.topics.Ingress(), f.topics.Level("1m"), f.topics.Level("1h"), f.topics.Control(), f.target} {
		cluster.CreateTopic(topic, 1, nil)
	}
	cluster.CreateTopic(f.topics.DLQ(), 2, nil) // the newest dead letters are those of every partition
	cluster.CreateTopic(f.topics.Schedules(), 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	f.cl = cluster.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	f.fleet, err = fleet.New(fleet.Config{Brokers: cluster.Brokers, Topics: f.topics, Group: name, Levels: set})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.fleet.Close)
	cfg := Config{Fleet: f.fleet, Actions: actions, NowFunc: func() time.Time { return f.now }}
	for _, w := range with {
		w(&cfg)
	}
	f.console, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(f.console)
	t.Cleanup(f.srv.Close)
	return f
}

// hop writes a record into level as kdelay writes one: stamped at ts, with
// its id, absolute due time and target.
func (f *fixture) hop(level, id string, ts time.Time) *kgo.Record {
	f.t.Helper()
	r := &kgo.Record{Topic: f.topics.Level(level), Value: []byte(id), Timestamp: ts,
		Headers: kdelay.AppendHop([]kgo.RecordHeader(nil), f.target, id, ts.Add(time.Hour))}
	return f.produce(r)
}

func (f *fixture) produce(r *kgo.Record) *kgo.Record {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		f.t.Fatalf("produce to %s: %v", r.Topic, err)
	}
	return r
}

// commit commits offset of partition 0 of level's topic for its group (at
// least once, the one every stage is read with), as the level's forwarder
// does once it has moved the records before it on.
func (f *fixture) commit(level string, offset int64) {
	f.t.Helper()
	topic, group := f.topics.Level(level), f.group
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: 0, At: offset, LeaderEpoch: -1})
	resp, err := kadm.NewClient(f.cl).CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		f.t.Fatalf("commit %s@%d for %s: %v", topic, offset, group, err)
	}
}

// get answers GET path with the status and the page.
func (f *fixture) get(path string) (int, string) {
	f.t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	if err != nil {
		f.t.Fatalf("GET %s: %v", path, err)
	}
	return read(f.t, resp)
}

// post posts form to path as the console's own page does: same origin,
// with the CSRF token of the console's forms unless form has a csrf field.
// header are more headers, name then value.
func (f *fixture) post(path string, form url.Values, header ...string) (int, string) {
	f.t.Helper()
	if !form.Has(csrfField) {
		form = maps.Clone(form)
		form.Set(csrfField, f.console.token(""))
	}
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("POST %s: %v", path, err)
	}
	return read(f.t, resp)
}

func read(t *testing.T, resp *http.Response) (int, string) {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// departures are the counts of the departures table's row for level, by
// column: what the bars say.
func departures(t *testing.T, page, level string) map[string]int64 {
	t.Helper()
	row := regexp.MustCompile(`(?s)<table id="departures">.*?<tr data-level="` + regexp.QuoteMeta(level) + `">(.*?)</tr>`).FindStringSubmatch(page)
	if row == nil {
		t.Fatalf("no departures row for %s in the page:\n%s", level, page)
	}
	got := map[string]int64{}
	for _, m := range regexp.MustCompile(`data-column="([^"]*)" data-records="(\d+)"`).FindAllStringSubmatch(row[1], -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		got[m[1]] = n
	}
	return got
}

// pending is the pending count of the levels table's row for level.
func pending(t *testing.T, page, level string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)<table id="levels">.*?<tr data-level="` + regexp.QuoteMeta(level) + `">.*?<td class="n pending">(\d+)</td>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no levels row for %s in the page:\n%s", level, page)
	}
	return m[1]
}
