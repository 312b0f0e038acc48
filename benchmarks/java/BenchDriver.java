import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;

/**
 * Load driver for benchmarks/bench_vs_java_broker.py over the real RocketMQ 4.9.8 Java client (compiled
 * against ../shared/java-broker/lib/*). Prints one summary JSON line.
 *
 *   producer NAMESRV TOPIC N [--threads T] [--size BYTES] [--warmup W] [--group G]
 *       one DefaultMQProducer shared by T threads (as RocketMQ's own benchmark Producer shares one), each
 *       thread sync-sending N/T messages (tag TagA, key "key-i", body "msg-i" padded with 'x' to BYTES,
 *       as the java-broker driver builds them), after W warm-up sends spread over the threads; the clock
 *       starts when every thread has finished its warm-up. Summary: sent, failed, seconds, msgs_per_s,
 *       p50_ms, p90_ms, p99_ms, mean_ms (each send's own latency).
 *   consumer NAMESRV TOPIC GROUP --expect N [--timeout S]
 *       push consumer (concurrent listener, CONSUME_FROM_FIRST_OFFSET) counting messages; stops at N.
 *       Summary: received, seconds (start() to the Nth message), first_to_last_s, msgs_per_s (over seconds).
 */
public class BenchDriver {
    static Map<String, String> opts(String[] a, List<String> pos) {
        Map<String, String> m = new HashMap<>();
        for (int i = 1; i < a.length; i++) {
            if (a[i].startsWith("--")) m.put(a[i].substring(2), a[++i]);
            else pos.add(a[i]);
        }
        return m;
    }

    public static void main(String[] a) throws Exception {
        List<String> pos = new ArrayList<>();
        Map<String, String> o = opts(a, pos);
        int rc = a[0].equals("producer") ? producer(pos, o) : a[0].equals("consumer") ? consumer(pos, o) : 2;
        System.out.flush();
        System.exit(rc);
    }

    static byte[] body(int i, int size) {
        byte[] b = ("msg-" + i).getBytes(StandardCharsets.UTF_8);
        if (size <= b.length) return b;
        byte[] out = new byte[size];
        Arrays.fill(out, (byte) 'x');
        System.arraycopy(b, 0, out, 0, b.length);
        return out;
    }

    static int producer(List<String> p, Map<String, String> o) throws Exception {
        String ns = p.get(0), topic = p.get(1);
        int n = Integer.parseInt(p.get(2));
        int threads = Integer.parseInt(o.getOrDefault("threads", "1"));
        int size = Integer.parseInt(o.getOrDefault("size", "256"));
        int warm = Integer.parseInt(o.getOrDefault("warmup", "0"));
        DefaultMQProducer pr = new DefaultMQProducer(o.getOrDefault("group", "bench_producer_group"));
        pr.setNamesrvAddr(ns);
        pr.setVipChannelEnabled(false);
        pr.setInstanceName("bench-" + ProcessHandle.current().pid());
        pr.setSendMsgTimeout(10000);
        pr.start();
        long[][] lat = new long[threads][];
        AtomicInteger failed = new AtomicInteger();
        AtomicLong t0 = new AtomicLong();
        String[] firstErr = new String[1];
        CyclicBarrier start = new CyclicBarrier(threads, () -> t0.set(System.nanoTime()));
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int id = t;
            final int from = (int) ((long) n * t / threads), to = (int) ((long) n * (t + 1) / threads);
            Thread th = new Thread(() -> {
                for (int i = id; i < warm; i += threads) {
                    try { pr.send(new Message(topic, "TagA", "warm-" + i, body(i, size))); } catch (Exception e) { /* warm-up */ }
                }
                try { start.await(); } catch (Exception e) { throw new RuntimeException(e); }
                long[] mine = new long[to - from];
                int ok = 0;
                for (int i = from; i < to; i++) {
                    Message m = new Message(topic, "TagA", "key-" + i, body(i, size));
                    long s = System.nanoTime();
                    try {
                        pr.send(m);
                        mine[ok++] = System.nanoTime() - s;
                    } catch (Exception e) {
                        failed.incrementAndGet();
                        synchronized (firstErr) { if (firstErr[0] == null) firstErr[0] = e.toString(); }
                    }
                }
                lat[id] = Arrays.copyOf(mine, ok);
            });
            workers.add(th);
            th.start();
        }
        for (Thread th : workers) th.join();
        double secs = (System.nanoTime() - t0.get()) / 1e9;
        long[] all = Arrays.stream(lat).flatMapToLong(Arrays::stream).sorted().toArray();
        int ok = all.length;
        System.out.printf("{\"summary\":{\"sent\":%d,\"failed\":%d,\"threads\":%d,\"seconds\":%.3f,\"msgs_per_s\":%.1f,"
            + "\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"mean_ms\":%.4f,\"error\":%s}}%n", ok, failed.get(),
            threads, secs, ok / secs, pct(all, 0.50), pct(all, 0.90), pct(all, 0.99),
            ok == 0 ? -1.0 : Arrays.stream(all).average().getAsDouble() / 1e6,
            firstErr[0] == null ? "null" : "\"" + firstErr[0].replaceAll("[\\\\\"\\p{Cntrl}]", " ") + "\"");
        pr.shutdown();
        return failed.get() == 0 ? 0 : 3;
    }

    static double pct(long[] sorted, double q) {
        return sorted.length == 0 ? -1.0 : sorted[Math.min(sorted.length - 1, (int) (sorted.length * q))] / 1e6;
    }

    static int consumer(List<String> p, Map<String, String> o) throws Exception {
        String ns = p.get(0), topic = p.get(1), group = p.get(2);
        int expect = Integer.parseInt(o.get("expect"));
        int timeout = Integer.parseInt(o.getOrDefault("timeout", "120"));
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(ns);
        c.setVipChannelEnabled(false);
        c.setInstanceName("bench-" + ProcessHandle.current().pid());
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        AtomicInteger got = new AtomicInteger();
        AtomicLong first = new AtomicLong(), last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            if (got.addAndGet(msgs.size()) >= expect && last.compareAndSet(0, now)) done.countDown();
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long t0 = System.nanoTime();
        c.start();
        boolean reached = done.await(timeout, TimeUnit.SECONDS);
        long end = reached ? last.get() : System.nanoTime();
        double secs = (end - t0) / 1e9;
        System.out.printf("{\"summary\":{\"received\":%d,\"expected\":%d,\"seconds\":%.3f,\"first_to_last_s\":%.3f,"
            + "\"msgs_per_s\":%.1f}}%n", got.get(), expect, secs, first.get() == 0 ? -1.0 : (end - first.get()) / 1e9,
            got.get() / secs);
        c.shutdown();
        return reached ? 0 : 3;
    }
}
