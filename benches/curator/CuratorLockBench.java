// Apache Curator 5.4's InterProcessMutex, uncontended and contended, for benches/locks.rs.
// Usage: CuratorLockBench <connect> <path> <contenders> <millis>
//   Starts one client (session) per contender, each with its own InterProcessMutex on
//   <path>; each acquires and releases it once (parents exist, classes loaded), then
//   prints READY and waits for a line on stdin.
//   contenders = 1 (uncontended): <millis> is instead a number of cycles; after 50
//   warm-up cycles (before READY), acquires and releases that many times in a row,
//   timing each cycle.
//   contenders > 1: every contender, on its own thread, acquires, marks itself inside,
//   yields ten times, checks it is still the only one inside and releases, in a loop,
//   until <millis> have passed (a contender waiting at that moment still gets its turn).
//   Prints RESULT <acquisitions> <elapsed ns> <median ns> <violations> <errors>, where
//   the median is of the cycle time (uncontended) or of the handoff, release -> next
//   acquisition (contended), then waits for another line before closing the sessions.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLockBench {
    static volatile boolean stop = false;

    static long median(List<Long> v) {
        if (v.isEmpty()) return 0;
        Collections.sort(v);
        return v.get(v.size() / 2);
    }

    public static void main(String[] args) throws Exception {
        String path = args[1];
        int contenders = Integer.parseInt(args[2]);
        long amount = Long.parseLong(args[3]);
        List<CuratorFramework> clients = new ArrayList<>();
        List<InterProcessMutex> mutexes = new ArrayList<>();
        for (int i = 0; i < contenders; i++) {
            CuratorFramework c = CuratorFrameworkFactory.newClient(args[0], new RetryOneTime(100));
            c.start();
            c.blockUntilConnected();
            clients.add(c);
            InterProcessMutex m = new InterProcessMutex(c, path);
            m.acquire();
            m.release();
            mutexes.add(m);
        }
        if (contenders == 1) {
            for (int i = 0; i < 50; i++) {
                mutexes.get(0).acquire();
                mutexes.get(0).release();
            }
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("READY");
        System.out.flush();
        in.readLine();
        String result;
        if (contenders == 1) {
            InterProcessMutex m = mutexes.get(0);
            List<Long> cycles = new ArrayList<>();
            long t0 = System.nanoTime();
            for (long i = 0; i < amount; i++) {
                long t = System.nanoTime();
                m.acquire();
                m.release();
                cycles.add(System.nanoTime() - t);
            }
            long elapsed = System.nanoTime() - t0;
            result = amount + " " + elapsed + " " + median(cycles) + " 0 0";
        } else {
            AtomicInteger inside = new AtomicInteger(0);
            AtomicInteger violations = new AtomicInteger(0);
            AtomicInteger errors = new AtomicInteger(0);
            AtomicLong acquisitions = new AtomicLong(0);
            AtomicLong releasedAt = new AtomicLong(0);
            List<Long> handoffs = Collections.synchronizedList(new ArrayList<>());
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < contenders; i++) {
                int me = i + 1;
                InterProcessMutex m = mutexes.get(i);
                Thread t = new Thread(() -> {
                    try {
                        start.await();
                        while (!stop) {
                            m.acquire();
                            long r = releasedAt.getAndSet(0);
                            if (r != 0) handoffs.add(System.nanoTime() - r);
                            if (inside.getAndSet(me) != 0) violations.incrementAndGet();
                            for (int y = 0; y < 10; y++) Thread.yield();
                            if (inside.get() != me) violations.incrementAndGet();
                            acquisitions.incrementAndGet();
                            inside.set(0);
                            releasedAt.set(System.nanoTime());
                            m.release();
                        }
                    } catch (Exception e) {
                        errors.incrementAndGet();
                        e.printStackTrace();
                    }
                });
                t.start();
                threads.add(t);
            }
            long t0 = System.nanoTime();
            start.countDown();
            Thread.sleep(amount);
            stop = true;
            for (Thread t : threads) t.join();
            long elapsed = System.nanoTime() - t0;
            List<Long> h;
            synchronized (handoffs) {
                h = new ArrayList<>(handoffs);
            }
            result = acquisitions.get() + " " + elapsed + " " + median(h) + " " + violations.get()
                    + " " + errors.get();
        }
        System.out.println("RESULT " + result);
        System.out.flush();
        in.readLine();
        for (CuratorFramework c : clients) c.close();
    }
}
