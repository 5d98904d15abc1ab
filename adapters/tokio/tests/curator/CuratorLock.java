// Apache Curator's InterProcessMutex on a path, for the interop test.
// Usage: CuratorLock <connect> <path> try|hold
//   try:  prints ACQUIRED or BUSY (waits 300 ms), releases at once
//   hold: prints ACQUIRED <node>, waits for a line on stdin, releases, prints RELEASED
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        InterProcessMutex mutex = new InterProcessMutex(client, args[1]);
        if (args[2].equals("try")) {
            boolean ok = mutex.acquire(300, TimeUnit.MILLISECONDS);
            System.out.println(ok ? "ACQUIRED" : "BUSY");
            if (ok) mutex.release();
        } else {
            mutex.acquire();
            System.out.println("ACQUIRED " + mutex.getParticipantNodes());
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            mutex.release();
            System.out.println("RELEASED");
        }
        System.out.flush();
        client.close();
    }
}
