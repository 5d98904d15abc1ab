// Apache Curator 5.4's InterProcessSemaphoreV2 under contention, for benches/semaphore.rs.
// Usage: CuratorSemaphoreBench <connect> <path> <maxLeases> <contenders> <each>
//   Starts one client (session) per contender, each acquires and returns a lease once
//   (parents exist), prints READY and waits for a line on stdin; then every contender,
//   on its own thread, acquires and returns a lease <each> times, all at once. Prints
//   RESULT <milliseconds> and waits for another line before closing the sessions.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.retry.RetryOneTime;

public class CuratorSemaphoreBench {
    public static void main(String[] args) throws Exception {
        String path = args[1];
        int leases = Integer.parseInt(args[2]);
        int contenders = Integer.parseInt(args[3]);
        int each = Integer.parseInt(args[4]);
        List<CuratorFramework> clients = new ArrayList<>();
        List<InterProcessSemaphoreV2> sems = new ArrayList<>();
        for (int i = 0; i < contenders; i++) {
            CuratorFramework c = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
            c.start();
            c.blockUntilConnected();
            clients.add(c);
            InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(c, path, leases);
            s.returnLease(s.acquire()); // warm up: parents exist
            sems.add(s);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("READY");
        System.out.flush();
        in.readLine();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (InterProcessSemaphoreV2 s : sems) {
            Thread t = new Thread(() -> {
                try {
                    start.await();
                    for (int i = 0; i < each; i++) s.returnLease(s.acquire());
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            });
            t.start();
            threads.add(t);
        }
        long t0 = System.nanoTime();
        start.countDown();
        for (Thread t : threads) t.join();
        System.out.println("RESULT " + (System.nanoTime() - t0) / 1000000);
        System.out.flush();
        in.readLine();
        for (CuratorFramework c : clients) c.close();
    }
}
