// Apache Curator holding an InterProcessMutex and leading a LeaderLatch, for the
// `zkr inspect` test. Usage: CuratorHolders <connect> <lock path> <latch path> <id>
// Takes the lock, starts the latch and waits to lead, then prints
// `READY <session id in hex>`; on a line `release` on stdin releases the lock
// (prints RELEASED); at the end of stdin closes everything and exits.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorHolders {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        InterProcessMutex lock = new InterProcessMutex(client, args[1]);
        lock.acquire();
        LeaderLatch latch = new LeaderLatch(client, args[2], args[3]);
        latch.start();
        latch.await();
        long session = client.getZookeeperClient().getZooKeeper().getSessionId();
        System.out.println("READY " + Long.toHexString(session));
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        boolean held = true;
        while ((line = in.readLine()) != null) {
            if (line.trim().equals("release") && held) {
                lock.release();
                held = false;
                System.out.println("RELEASED");
                System.out.flush();
            }
        }
        if (held) {
            lock.release();
        }
        latch.close();
        client.close();
    }
}
