// Apache Curator's InterProcessSemaphoreV2 on a path, for the semaphore interop test.
// Usage: CuratorSemaphore <connect> <path> <maxLeases> try|hold
//   try:  prints ACQUIRED or BUSY (waits 300 ms), returns the lease at once
//   hold: prints ACQUIRED <participant nodes>, waits for a line on stdin, returns the
//         lease, prints RELEASED
//   bench <n>: acquires and returns a lease n times in a row, prints the milliseconds
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public class CuratorSemaphore {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
        client.start();
        client.blockUntilConnected();
        InterProcessSemaphoreV2 sem =
            new InterProcessSemaphoreV2(client, args[1], Integer.parseInt(args[2]));
        if (args[3].equals("bench")) {
            int n = Integer.parseInt(args[4]);
            sem.returnLease(sem.acquire()); // warm up: parents exist
            long start = System.nanoTime();
            for (int i = 0; i < n; i++) {
                sem.returnLease(sem.acquire());
            }
            System.out.println((System.nanoTime() - start) / 1000000);
        } else if (args[3].equals("try")) {
            Lease lease = sem.acquire(300, TimeUnit.MILLISECONDS);
            System.out.println(lease != null ? "ACQUIRED" : "BUSY");
            if (lease != null) sem.returnLease(lease);
        } else {
            Lease lease = sem.acquire();
            System.out.println("ACQUIRED " + sem.getParticipantNodes());
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            sem.returnLease(lease);
            System.out.println("RELEASED");
        }
        System.out.flush();
        client.close();
    }
}
