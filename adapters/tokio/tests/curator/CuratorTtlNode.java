// Curator 5.4's PersistentTtlNode next to ours (tests/curator/ttl_node.rs).
// Usage: CuratorTtlNode <connect> <path> <ttl-ms> <data>
// Prints EXISTING <data> (the node's data as this client reads it before starting, or
// EXISTING - if there is none), starts a PersistentTtlNode(<path>, <ttl-ms>, <data>),
// prints CREATED <its waitForInitialCreate(10 s)>, then TOUCHED once <path>/touch
// exists. Command on stdin: "close" closes the node (CLOSED).
// Runs until killed. Session timeout 20 s (so a node that goes within a few seconds
// of a SIGKILL went by its TTL, not with the session).
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.nodes.PersistentTtlNode;
import org.apache.curator.retry.RetryNTimes;

public class CuratorTtlNode {
    public static void main(String[] args) throws Exception {
        String connect = args[0];
        String path = args[1];
        long ttlMs = Long.parseLong(args[2]);
        byte[] data = args[3].getBytes(StandardCharsets.UTF_8);
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(connect)
            .sessionTimeoutMs(20000)
            .connectionTimeoutMs(10000)
            .retryPolicy(new RetryNTimes(100, 100))
            .build();
        client.start();
        client.blockUntilConnected();
        if (client.checkExists().forPath(path) == null) {
            System.out.println("EXISTING -");
        } else {
            System.out.println("EXISTING "
                + new String(client.getData().forPath(path), StandardCharsets.UTF_8));
        }
        PersistentTtlNode node = new PersistentTtlNode(client, path, ttlMs, data);
        node.start();
        System.out.println("CREATED " + node.waitForInitialCreate(10, TimeUnit.SECONDS));
        while (client.checkExists().forPath(path + "/touch") == null) {
            Thread.sleep(10);
        }
        System.out.println("TOUCHED");
        java.util.Scanner in = new java.util.Scanner(System.in);
        while (in.hasNextLine()) {
            if (in.nextLine().trim().equals("close")) {
                node.close();
                System.out.println("CLOSED");
            }
        }
        Thread.sleep(Long.MAX_VALUE);
    }
}
