import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * RocketBench measures how late Apache RocketMQ delivers delayed messages, on
 * the workload shape of `kdelay bench`'s level records, so the two can be put
 * side by side (docs/BENCHMARKS.md, "RocketMQ beside kdelay").
 *
 * <p>Per level, --per-level records delayed by exactly the level, sent at
 * random times over --spread; each with a floor twin: a plain timer in this
 * process fires at the due time and sends one message straight to the target
 * topic, read by the same consumer. Lateness is the consumer's arrival time
 * (microseconds, when the listener is handed the message) minus the due
 * time, which is the send time in whole milliseconds plus the delay, as
 * kdelay bench defines it. An arrival before the due time counts as early
 * (and as 0 in the percentiles), one missing --grace after the last due time
 * as lost.
 *
 * <p>Modes, one after the other, each with its own topic and group:
 * delay (setDelayTimeLevel: the broker's ScheduleMessageService) and timer
 * (setDeliverTimeMs: the 5.x timer wheel, whose slot is the broker's
 * timerPrecisionMs).
 *
 * <p>Run it with bench/rocketmq/run, which compiles it against the jars of
 * scripts/local-rocketmq.
 */
public class RocketBench {
    static final String DUE = "bench_due_ms", GROUP = "bench_group", ID = "bench_id";

    // --- options ---------------------------------------------------------

    static String namesrv = "127.0.0.1:19876";
    static List<String> modes = List.of("delay", "timer");
    static List<String> levels = List.of("1s", "5s", "10s", "30s");
    static int perLevel = 200, queues = 6;
    static Duration spread = Duration.ofSeconds(10), grace = Duration.ofSeconds(30);
    static long seed = 1;
    static String jsonPath, label = "";

    static void usage(String problem) {
        System.err.println("RocketBench: " + problem);
        System.err.println("usage: RocketBench --namesrv HOST:PORT [--modes delay,timer] [--levels 1s,5s,10s,30s]"
            + " [--per-level 200] [--spread 10s] [--grace 30s] [--queues 6] [--seed 1] [--label TEXT] [--json FILE]");
        System.exit(2);
    }

    static void parse(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("-h") || a.equals("--help")) usage("measures RocketMQ's delay levels and timer messages");
            if (i + 1 >= args.length) usage(a + " needs a value");
            String v = args[++i];
            switch (a) {
                case "--namesrv" -> namesrv = v;
                case "--modes" -> modes = List.of(v.split(","));
                case "--levels" -> levels = List.of(v.split(","));
                case "--per-level" -> perLevel = Integer.parseInt(v);
                case "--spread" -> spread = duration(v);
                case "--grace" -> grace = duration(v);
                case "--queues" -> queues = Integer.parseInt(v);
                case "--seed" -> seed = Long.parseLong(v);
                case "--label" -> label = v;
                case "--json" -> jsonPath = v;
                default -> usage("unknown flag " + a);
            }
        }
        for (String m : modes) {
            if (!m.equals("delay") && !m.equals("timer")) usage("mode " + m + ": use delay or timer");
        }
        for (String l : levels) duration(l);
        if (perLevel < 1) usage("--per-level must be at least 1");
    }

    /** duration parses the Go-style durations kdelay takes: 500ms, 1s, 1m, 1m30s, 2h. */
    static Duration duration(String s) {
        var m = java.util.regex.Pattern.compile("(\\d+)(ms|s|m|h)").matcher(s);
        long ms = 0;
        int end = 0;
        while (m.find() && m.start() == end) {
            long n = Long.parseLong(m.group(1));
            ms += switch (m.group(2)) {
                case "ms" -> n;
                case "s" -> n * 1000;
                case "m" -> n * 60_000;
                default -> n * 3_600_000;
            };
            end = m.end();
        }
        if (end != s.length() || s.isEmpty()) usage("'" + s + "' is not a duration like 500ms, 10s, 1m30s");
        return Duration.ofMillis(ms);
    }

    // --- a group's lateness ---------------------------------------------

    /** Lateness of one group, in microseconds, as kdelay bench's lateness type. */
    static final class Group {
        final String name;
        final AtomicLong sent = new AtomicLong(), dups = new AtomicLong(), early = new AtomicLong();
        final List<Long> late = new ArrayList<>(); // guarded by this
        final List<Long> stored = new ArrayList<>(); // guarded by this: store time - due, ms
        long mostEarlyUs;

        Group(String name) { this.name = name; }

        synchronized void record(long lateUs, long storedMs) {
            stored.add(storedMs);
            if (lateUs < 0) {
                early.incrementAndGet();
                mostEarlyUs = Math.max(mostEarlyUs, -lateUs);
                lateUs = 0;
            }
            late.add(lateUs);
        }

        synchronized Map<String, Object> summary() {
            long[] v = late.stream().mapToLong(Long::longValue).sorted().toArray();
            var m = new LinkedHashMap<String, Object>();
            m.put("name", name);
            m.put("sent", sent.get());
            m.put("delivered", v.length);
            m.put("lost", Math.max(sent.get() - v.length, 0));
            m.put("duplicates", dups.get());
            m.put("early", early.get());
            m.put("most_early_ms", mostEarlyUs / 1000.0);
            m.put("p50_ms", pct(v, 50));
            m.put("p90_ms", pct(v, 90));
            m.put("p99_ms", pct(v, 99));
            m.put("p999_ms", pct(v, 99.9));
            m.put("max_ms", v.length == 0 ? 0 : v[v.length - 1] / 1000.0);
            // Where the time goes: the broker's store timestamp of the message
            // the consumer got (for delay and timer messages, the copy the
            // broker wrote to the target when due) minus the due time. The
            // rest of the lateness is the hand-off to the consumer.
            long[] st = stored.stream().mapToLong(Long::longValue).sorted().toArray();
            m.put("stored_p50_ms", pct(st, 50) * 1000);
            m.put("stored_p99_ms", pct(st, 99) * 1000);
            return m;
        }

        /** pct is the nearest-rank percentile, in milliseconds. */
        static double pct(long[] sorted, double p) {
            if (sorted.length == 0) return 0;
            int rank = (int) Math.ceil(p / 100 * sorted.length);
            return sorted[Math.max(rank, 1) - 1] / 1000.0;
        }
    }

    static long nowUs() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000 + t.getNano() / 1000;
    }

    // --- one mode --------------------------------------------------------

    record Send(long atMs, String level, long delayMs, boolean floor) {}

    /** plan lays out kdelay bench's level records: each level's records and their floor twins at random times. */
    static List<Send> plan() {
        Random rng = new Random(seed);
        List<Send> sends = new ArrayList<>();
        for (String l : levels) {
            long d = duration(l).toMillis();
            for (int i = 0; i < perLevel; i++) {
                sends.add(new Send(rng.nextLong(Math.max(spread.toMillis(), 1)), l, d, false));
                sends.add(new Send(rng.nextLong(Math.max(spread.toMillis(), 1)), l, d, true));
            }
        }
        sends.sort((a, b) -> Long.compare(a.atMs, b.atMs));
        return sends;
    }

    static List<Map<String, Object>> runMode(DefaultMQAdminExt admin, String brokerAddr, Properties brokerConf, String mode)
            throws Exception {
        String suffix = Long.toHexString(System.nanoTime() & 0xffffff);
        String topic = "rocketbench-" + mode + "-" + suffix, group = "rocketbench-" + mode + "-" + suffix;
        admin.createAndUpdateTopicConfig(brokerAddr, new TopicConfig(topic, queues, queues));
        awaitRoute(admin, topic);

        Map<String, Integer> levelIndex = delayLevels(brokerConf);
        Map<String, Group> groups = new LinkedHashMap<>();
        for (String l : levels) {
            if (mode.equals("delay") && !levelIndex.containsKey(l)) {
                throw new IllegalArgumentException("level " + l + " is not one of the broker's messageDelayLevel "
                    + levelIndex.keySet() + "; set messageDelayLevel in ROCKETMQ_EXTRA_PROPS or pick levels from that list");
            }
            groups.put("level=" + l, new Group("level=" + l));
        }
        groups.put("floor", new Group("floor"));

        Map<String, Boolean> seen = new ConcurrentHashMap<>();
        AtomicLong delivered = new AtomicLong();
        CountDownLatch warm = new CountDownLatch(1);
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long at = nowUs(); // in hand: the listener is called as soon as a pull returns
            for (MessageExt m : msgs) {
                String g = m.getUserProperty(GROUP);
                if (g == null) {
                    warm.countDown();
                    continue;
                }
                Group gr = groups.get(g);
                if (seen.putIfAbsent(m.getUserProperty(ID), true) != null) {
                    gr.dups.incrementAndGet();
                    continue;
                }
                long due = Long.parseLong(m.getUserProperty(DUE));
                gr.record(at - due * 1000, m.getStoreTimestamp() - due);
                delivered.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        DefaultMQProducer producer = new DefaultMQProducer("rocketbench-producer-" + suffix);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(5000);
        producer.start();
        ScheduledExecutorService timers = Executors.newScheduledThreadPool(1);
        try {
            // The consumer is ready once a message sent now comes back; this
            // also warms up both clients before anything is measured.
            producer.send(new Message(topic, "warm-up".getBytes()));
            if (!warm.await(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the consumer of " + topic + " got nothing within 60 s; is the broker serving? (see its logs)");
            }
            System.err.printf("RocketBench: mode %s: sending %d records over %s, topic %s%n",
                mode, 2 * perLevel * levels.size(), spread, topic);
            AtomicLong failed = new AtomicLong(), seq = new AtomicLong();
            SendCallback cb = new SendCallback() {
                public void onSuccess(SendResult r) {}

                public void onException(Throwable e) {
                    if (failed.incrementAndGet() == 1) System.err.println("RocketBench: send failed: " + e);
                }
            };
            byte[] value = new byte[100];
            new Random(seed).nextBytes(value);
            long start = System.currentTimeMillis(), lastDue = 0;
            for (Send s : plan()) {
                long wait = start + s.atMs - System.currentTimeMillis();
                if (wait > 0) Thread.sleep(wait);
                long ts = System.currentTimeMillis(), due = ts + s.delayMs;
                lastDue = Math.max(lastDue, due);
                Group g = groups.get(s.floor ? "floor" : "level=" + s.level);
                g.sent.incrementAndGet();
                Message m = new Message(topic, value);
                m.putUserProperty(DUE, Long.toString(due));
                m.putUserProperty(GROUP, g.name);
                m.putUserProperty(ID, Long.toString(seq.incrementAndGet()));
                if (s.floor) {
                    timers.schedule(() -> send(producer, m, cb), due * 1000 - nowUs(), TimeUnit.MICROSECONDS);
                } else if (mode.equals("delay")) {
                    m.setDelayTimeLevel(levelIndex.get(s.level));
                    producer.send(m, cb);
                } else {
                    m.setDeliverTimeMs(due);
                    producer.send(m, cb);
                }
            }
            long want = 2L * perLevel * levels.size(), deadline = lastDue + grace.toMillis();
            while (delivered.get() < want && System.currentTimeMillis() < deadline) {
                Thread.sleep(50);
            }
            if (failed.get() > 0) System.err.printf("RocketBench: %d sends failed%n", failed.get());
        } finally {
            timers.shutdownNow();
            producer.shutdown();
            consumer.shutdown();
        }
        List<Map<String, Object>> out = new ArrayList<>();
        for (Group g : groups.values()) {
            var s = g.summary();
            s.put("mode", mode);
            out.add(s);
        }
        return out;
    }

    static void send(DefaultMQProducer p, Message m, SendCallback cb) {
        try {
            p.send(m, cb);
        } catch (Exception e) {
            cb.onException(e);
        }
    }

    /** delayLevels maps a level name (1s, 5s, ...) to its index in the broker's messageDelayLevel, from 1. */
    static Map<String, Integer> delayLevels(Properties brokerConf) {
        String list = brokerConf.getProperty("messageDelayLevel", "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h");
        Map<String, Integer> out = new LinkedHashMap<>();
        String[] names = list.trim().split("\\s+");
        for (int i = 0; i < names.length; i++) out.put(names[i], i + 1);
        return out;
    }

    static void awaitRoute(DefaultMQAdminExt admin, String topic) throws InterruptedException {
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            try {
                if (!admin.examineTopicRouteInfo(topic).getQueueDatas().isEmpty()) return;
            } catch (Exception e) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("topic " + topic + " has no route on " + namesrv + " 30 s after it was created", e);
                }
            }
            Thread.sleep(200);
        }
    }

    // --- output -----------------------------------------------------------

    static String json(Object o) {
        if (o instanceof Map<?, ?> m) {
            List<String> parts = new ArrayList<>();
            m.forEach((k, v) -> parts.add(json(k) + ":" + json(v)));
            return "{" + String.join(",", parts) + "}";
        }
        if (o instanceof List<?> l) return "[" + String.join(",", l.stream().map(RocketBench::json).toList()) + "]";
        if (o instanceof String s) return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
        return String.valueOf(o);
    }

    static void print(List<Map<String, Object>> rows) {
        System.out.printf("%-6s %-11s %6s %6s %5s %6s %10s %10s %10s %10s %10s %10s%n",
            "mode", "group", "sent", "lost", "dups", "early", "p50 ms", "p99 ms", "max ms", "mostEarly", "stored p50", "stored p99");
        for (var r : rows) {
            System.out.printf(Locale.ROOT, "%-6s %-11s %6d %6d %5d %6d %10.3f %10.3f %10.3f %10.3f %10.0f %10.0f%n",
                r.get("mode"), r.get("name"), r.get("sent"), r.get("lost"), r.get("duplicates"), r.get("early"),
                r.get("p50_ms"), r.get("p99_ms"), r.get("max_ms"), r.get("most_early_ms"),
                r.get("stored_p50_ms"), r.get("stored_p99_ms"));
        }
        // Go benchmark lines, as kdelay bench prints them, so benchstat reads both.
        for (var r : rows) {
            System.out.printf(Locale.ROOT,
                "BenchmarkLateness/%s/mode=rocketmq-%s%s %d %.0f p50-ns %.0f p90-ns %.0f p99-ns %.0f p99.9-ns %.0f max-ns %d early %d lost %d dups%n",
                r.get("name"), r.get("mode"), label.isEmpty() ? "" : "-" + label, ((Number) r.get("delivered")).longValue(),
                ns(r, "p50_ms"), ns(r, "p90_ms"), ns(r, "p99_ms"), ns(r, "p999_ms"), ns(r, "max_ms"),
                r.get("early"), r.get("lost"), r.get("duplicates"));
        }
    }

    static double ns(Map<String, Object> r, String k) { return ((Double) r.get(k)) * 1e6; }

    public static void main(String[] args) throws Exception {
        parse(args);
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("rocketbench-admin-" + ProcessHandle.current().pid());
        admin.start();
        List<Map<String, Object>> rows = new ArrayList<>();
        Map<String, Object> report = new LinkedHashMap<>();
        try {
            ClusterInfo ci;
            try {
                ci = admin.examineBrokerClusterInfo();
            } catch (Exception e) {
                throw new IllegalStateException("cannot reach the name server " + namesrv
                    + " (" + e.getMessage() + "); start one with scripts/local-rocketmq start and pass the address it prints", e);
            }
            if (ci.getBrokerAddrTable().isEmpty()) {
                throw new IllegalStateException("no broker registered with " + namesrv + "; start one with scripts/local-rocketmq start");
            }
            String brokerAddr = ci.getBrokerAddrTable().values().iterator().next().selectBrokerAddr();
            Properties conf = admin.getBrokerConfig(brokerAddr);
            report.put("date", Instant.now().toString());
            report.put("label", label);
            report.put("broker", brokerAddr);
            report.put("timerPrecisionMs", conf.getProperty("timerPrecisionMs"));
            report.put("timerWheelEnable", conf.getProperty("timerWheelEnable"));
            report.put("timerInterceptDelayLevel", conf.getProperty("timerInterceptDelayLevel"));
            report.put("levels", levels);
            report.put("per_level", perLevel);
            report.put("spread_ms", spread.toMillis());
            System.err.printf("RocketBench: broker %s, timerPrecisionMs=%s%n", brokerAddr, conf.getProperty("timerPrecisionMs"));
            for (String mode : modes) rows.addAll(runMode(admin, brokerAddr, conf, mode));
        } finally {
            admin.shutdown();
        }
        report.put("groups", rows);
        print(rows);
        if (jsonPath != null) Files.writeString(Path.of(jsonPath), json(report) + "\n");
        System.exit(rows.stream().anyMatch(r -> ((Number) r.get("lost")).longValue() > 0) ? 1 : 0);
    }
}
