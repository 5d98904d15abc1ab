// Apache Curator 5.4's DistributedDelayQueue, for benches/delay_queue.rs.
// Usage: CuratorDelayQueueBench <connect> <path> <n> <delay-ms> <spread-ms>
//   Starts a producer client and a consumer client (a consumer queue on the path),
//   prints READY and waits for a line on stdin; then puts <n> items, item i due at
//   start + delay + i * spread / n (Unix ms, carried in its data), and waits until the
//   consumer has them all. Prints RESULT <put ms> <p50> <p99> <max lateness ms> (how
//   long after its time each item was consumed) and waits for a line before closing.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.DistributedDelayQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryOneTime;

public class CuratorDelayQueueBench {
    static final QueueSerializer<String> UTF8 = new QueueSerializer<String>() {
        public byte[] serialize(String item) {
            return item.getBytes(StandardCharsets.UTF_8);
        }

        public String deserialize(byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
    };

    public static void main(String[] args) throws Exception {
        int n = Integer.parseInt(args[2]);
        long delay = Long.parseLong(args[3]);
        long spread = Long.parseLong(args[4]);
        CuratorFramework pc = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        CuratorFramework cc = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        pc.start();
        cc.start();
        pc.blockUntilConnected();
        cc.blockUntilConnected();
        final List<Long> late = Collections.synchronizedList(new ArrayList<>());
        final CountDownLatch done = new CountDownLatch(n);
        QueueConsumer<String> consumer = new QueueConsumer<String>() {
            public void consumeMessage(String message) {
                long due = Long.parseLong(message.substring(message.indexOf('@') + 1));
                late.add(System.currentTimeMillis() - due);
                done.countDown();
            }

            public void stateChanged(CuratorFramework c, ConnectionState s) {}
        };
        DistributedDelayQueue<String> consuming = QueueBuilder.builder(cc, consumer, UTF8, args[1])
            .buildDelayQueue();
        DistributedDelayQueue<String> producing = QueueBuilder.builder(pc, null, UTF8, args[1])
            .buildDelayQueue();
        consuming.start();
        producing.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("READY");
        System.out.flush();
        in.readLine();
        long start = System.currentTimeMillis();
        for (int i = 0; i < n; i++) {
            long due = start + delay + i * spread / n;
            producing.put("i" + i + "@" + due, due);
        }
        producing.flushPuts(60, java.util.concurrent.TimeUnit.SECONDS);
        long putMs = System.currentTimeMillis() - start;
        done.await();
        List<Long> sorted = new ArrayList<>(late);
        Collections.sort(sorted);
        System.out.println("RESULT " + putMs + " " + sorted.get(n / 2) + " "
            + sorted.get(Math.min(n - 1, n * 99 / 100)) + " " + sorted.get(n - 1));
        System.out.flush();
        in.readLine();
        consuming.close();
        producing.close();
        cc.close();
        pc.close();
    }
}
