// Apache Curator's DistributedDelayQueue on a path, for the delay queue interop test.
// Usage: CuratorDelayQueue <connect> <path> put <n> <prefix> <delay-ms>
//          puts <prefix><i>@<time> for i in 0..n, each takeable at <time> = now + delay-ms
//          (Unix ms), prints PUT <n>
//        CuratorDelayQueue <connect> <path> take <n>
//          consumes n items, prints ITEM <data> <Unix ms when consumed> for each, then DONE
import java.nio.charset.StandardCharsets;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.DistributedDelayQueue;
import org.apache.curator.framework.recipes.queue.QueueBuilder;
import org.apache.curator.framework.recipes.queue.QueueConsumer;
import org.apache.curator.framework.recipes.queue.QueueSerializer;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.RetryOneTime;

public class CuratorDelayQueue {
    static final QueueSerializer<String> UTF8 = new QueueSerializer<String>() {
        public byte[] serialize(String item) {
            return item.getBytes(StandardCharsets.UTF_8);
        }

        public String deserialize(byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
    };

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        int n = Integer.parseInt(args[3]);
        if (args[2].equals("put")) {
            DistributedDelayQueue<String> queue = QueueBuilder.builder(client, null, UTF8, args[1])
                .putInBackground(false)
                .buildDelayQueue();
            queue.start();
            long delay = Long.parseLong(args[5]);
            for (int i = 0; i < n; i++) {
                long at = System.currentTimeMillis() + delay;
                queue.put(args[4] + i + "@" + at, at);
            }
            System.out.println("PUT " + n);
            queue.close();
        } else {
            final LinkedBlockingQueue<String> seen = new LinkedBlockingQueue<>();
            QueueConsumer<String> consumer = new QueueConsumer<String>() {
                public void consumeMessage(String message) {
                    seen.add("ITEM " + message + " " + System.currentTimeMillis());
                }

                public void stateChanged(CuratorFramework c, ConnectionState s) {}
            };
            DistributedDelayQueue<String> queue = QueueBuilder.builder(client, consumer, UTF8, args[1])
                .buildDelayQueue();
            queue.start();
            System.out.println("STARTED");
            System.out.flush();
            for (int i = 0; i < n; i++) {
                String line = seen.poll(60, TimeUnit.SECONDS);
                if (line == null) {
                    break;
                }
                System.out.println(line);
                System.out.flush();
            }
            System.out.println("DONE");
            queue.close();
        }
        System.out.flush();
        client.close();
    }
}
