// Curator's InterProcessMutex taking turns with ours (tests/curator/tls_lock.rs): <rounds>
// times, acquires <lock>, then in the protected section creates the ephemeral <inside>
// (NodeExists there means two holders: prints OVERLAP), checks its fencing token (its
// lock node's czxid, as ours) against the highest in <fence>'s data and writes its own
// there with a version check (a lower token prints STALE), waits 30 ms, deletes <inside>,
// releases. Prints ROUND <token> per round, then DONE. TLS or not is the JVM's
// properties (zookeeper.client.secure, zookeeper.clientCnxnSocket, zookeeper.ssl.*).
import java.nio.charset.StandardCharsets;
import java.util.Collection;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorFencedLock {
    public static void main(String[] args) throws Exception {
        String lock = args[1];
        String inside = args[2];
        String fence = args[3];
        int rounds = Integer.parseInt(args[4]);
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(args[0])
            .sessionTimeoutMs(10000)
            .connectionTimeoutMs(20000)
            .retryPolicy(new RetryNTimes(100, 100))
            .build();
        client.start();
        client.blockUntilConnected();
        InterProcessMutex mutex = new InterProcessMutex(client, lock);
        System.out.println("READY");
        for (int i = 0; i < rounds; i++) {
            mutex.acquire();
            Collection<String> nodes = mutex.getParticipantNodes();
            long token = client.checkExists().forPath(nodes.iterator().next()).getCzxid();
            try {
                client.create().withMode(CreateMode.EPHEMERAL).forPath(inside);
            } catch (KeeperException.NodeExistsException e) {
                System.out.println("OVERLAP");
            }
            Stat stat = new Stat();
            long highest = Long.parseLong(new String(
                client.getData().storingStatIn(stat).forPath(fence), StandardCharsets.UTF_8));
            if (token <= highest) {
                System.out.println("STALE " + token + " " + highest);
            }
            client.setData().withVersion(stat.getVersion())
                .forPath(fence, Long.toString(token).getBytes(StandardCharsets.UTF_8));
            Thread.sleep(30);
            client.delete().forPath(inside);
            mutex.release();
            System.out.println("ROUND " + token);
            Thread.sleep(5);
        }
        System.out.println("DONE");
        client.close();
    }
}
