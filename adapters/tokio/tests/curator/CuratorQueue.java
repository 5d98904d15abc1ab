// Apache Curator's SimpleDistributedQueue on a path, for the queue interop test.
// Usage: CuratorQueue <connect> <path> offer <n> <prefix>
//          offers <prefix>0 .. <prefix><n-1> in order, prints OFFERED <n>
//        CuratorQueue <connect> <path> take <n>
//          takes n items (blocking take()), prints ITEM <data> for each, then DONE
import java.nio.charset.StandardCharsets;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;
import org.apache.curator.retry.RetryOneTime;

public class CuratorQueue {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        SimpleDistributedQueue queue = new SimpleDistributedQueue(client, args[1]);
        int n = Integer.parseInt(args[3]);
        if (args[2].equals("offer")) {
            for (int i = 0; i < n; i++) {
                if (!queue.offer((args[4] + i).getBytes(StandardCharsets.UTF_8))) {
                    System.out.println("OFFER FAILED " + i);
                }
            }
            System.out.println("OFFERED " + n);
        } else {
            for (int i = 0; i < n; i++) {
                byte[] data = queue.take();
                System.out.println("ITEM " + new String(data, StandardCharsets.UTF_8));
                System.out.flush();
            }
            System.out.println("DONE");
        }
        System.out.flush();
        client.close();
    }
}
