package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kdelay/kdelay"
	"github.com/kdelay/kdelay/kafkatest"
)

// TestDLQReplay is an operator's repair end to end: a record the target
// refuses (larger than its max.message.bytes) is dead-lettered; dlq list
// shows why and where from; the cause is fixed (max.message.bytes raised);
// dlq replay delivers it once, with the id it would have had; a second
// replay delivers it with the same id, so a consumer that dedupes by id
// gets it once.
func TestDLQReplay(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.serve()
	small := e.target + ".small"
	e.createTopic(t, s, small, map[string]*string{"max.message.bytes": ptr("1000")})
	arrivals := s.collect(t, small)
	client := []string{"--brokers", s.brokers, "--topic-prefix", e.prefix}

	// Random, so that the producer's compression cannot bring it under the limit.
	value := base64.StdEncoding.EncodeToString(randomBytes(t, 3000))
	sent := e.run(t, append([]string{"send", "--target", small, "--delay", "0", "--key", "k", "--header", "trace=1", value}, client...)...)
	source := regexp.MustCompile(`id=(\S+)`).FindStringSubmatch(sent)[1] // no --id: the ingress place

	var listed []listedLetter
	if !eventually(20*time.Second, func() bool {
		listed = e.listJSON(t, append([]string{"--target", small}, client...))
		return len(listed) == 1
	}) {
		t.Fatalf("dlq list --target %s: %+v after 20s, want the one record the target refused", small, listed)
	}
	t.Run("list shows the reason, source, target and id", func(t *testing.T) {
		d := listed[0]
		if !strings.Contains(d.Reason, "max.message.bytes") || d.Source != source || d.ID != source || d.Target != small || d.AgeSeconds < 0 || d.AgeSeconds > 30 {
			t.Errorf("dlq list: %+v\nwant a reason naming max.message.bytes, source and id %s, target %s, an age of seconds", d, source, small)
		}
		if other := e.listJSON(t, append([]string{"--reason", "no such reason"}, client...)); len(other) != 0 {
			t.Errorf("dlq list --reason 'no such reason': %+v, want nothing", other)
		}
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	altered, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: ptr("1048588")}}, small)
	if err == nil {
		err = altered[0].Err
	}
	if err != nil {
		t.Fatalf("raise max.message.bytes of %s: %v", small, err)
	}

	out := e.run(t, append([]string{"dlq", "replay", source}, client...)...)
	if !strings.HasPrefix(out, "replayed "+source+" id="+source+" as "+kdelay.Topics{Prefix: e.prefix}.Ingress()+"/") {
		t.Errorf("dlq replay printed %q, want the source, its id and where it went", out)
	}
	got := arrivals.Until(20*time.Second, settled(func(got []kafkatest.Arrival) bool { return len(got) >= 1 }, time.Second))
	t.Run("replay delivers it once with its original id", func(t *testing.T) {
		if len(got) != 1 {
			t.Fatalf("%d arrived after the replay, want 1", len(got))
		}
		r := got[0].Record
		if string(r.Value) != value || string(r.Key) != "k" || headerOf(r, kdelay.HeaderID) != source || headerOf(r, "trace") != "1" {
			t.Errorf("delivered key %q, %d bytes of value, id %q, trace %q; want key k, the 4000 bytes sent, id %s, trace 1",
				r.Key, len(r.Value), headerOf(r, kdelay.HeaderID), headerOf(r, "trace"), source)
		}
		for _, h := range []string{kdelay.HeaderError, kdelay.HeaderSource, kdelay.HeaderTruncated} {
			if _, ok := header(r, h); ok {
				t.Errorf("delivered record has %s, which replay strips", h)
			}
		}
	})

	e.run(t, append([]string{"dlq", "replay", "--reason", "MAX.MESSAGE.BYTES", "--target", small}, client...)...)
	got = arrivals.Until(20*time.Second, settled(func(got []kafkatest.Arrival) bool { return len(got) >= 2 }, time.Second))
	t.Run("a second replay delivers the same id", func(t *testing.T) {
		if ids := kafkatest.IDs(got); len(got) != 2 || ids[source] != 2 {
			t.Errorf("after two replays: %d arrived with ids %v, want 2, both with id %s", len(got), ids, source)
		}
	})
}

// createTopic creates topic on serve's brokers with configs: on a real
// cluster with the test's cleanup, on the embedded broker directly.
func (e *e2e) createTopic(t *testing.T, s *process, topic string, configs map[string]*string) {
	t.Helper()
	if e.cluster != nil {
		e.cluster.CreateTopic(topic, 2, configs)
		return
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// listJSON runs dlq list --json and returns its objects.
func (e *e2e) listJSON(t *testing.T, args []string) []listedLetter {
	t.Helper()
	out := e.run(t, append([]string{"dlq", "list", "--json"}, args...)...)
	var ls []listedLetter
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l listedLetter
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("dlq list --json printed %q: %v", sc.Text(), err)
		}
		ls = append(ls, l)
	}
	return ls
}

func ptr[T any](v T) *T { return &v }

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}
