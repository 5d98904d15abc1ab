// Apache Curator 5.4's InterProcessMutex, uncontended and contended, for benches/locks.rs.
// Usage: CuratorLockBench <connect> <path> <contenders> <warm-up>
//   Starts one client (session) per contender, each with its own InterProcessMutex on
//   <path>; each acquires and releases it once (parents exist). Then warms up (below),
//   prints READY, and runs one round per line "go <amount>" read from stdin, until a
//   line "close" (or the end of stdin), and closes the sessions.
//   contenders = 1 (uncontended): <warm-up> and <amount> are numbers of cycles: a round
//   is <amount> acquire + release cycles in a row, each timed.
//   contenders > 1: <warm-up> and <amount> are milliseconds: in a round, every
//   contender, on its own thread, acquires, marks itself inside, yields ten times,
//   checks it is still the only one inside and releases, in a loop, for <amount> ms (a
//   contender waiting when time is up still gets its turn). Overlaps seen during the
//   warm-up count as violations of the first round.
//   Each round prints RESULT <acquisitions> <elapsed ns> <median ns> <violations>
//   <errors> <max ns>, where median and max are of the cycle time (uncontended) or of
//   the handoff, the holder's release call -> the next holder's acquire returning
//   (contended).
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
    static long median(List<Long> v) {
        if (v.isEmpty()) return 0;
        Collections.sort(v);
        return v.get(v.size() / 2);
    }

    /** One contended run of `millis` ms over all mutexes. */
    static class Run {
        final AtomicInteger inside = new AtomicInteger(0);
        final AtomicInteger violations = new AtomicInteger(0);
        final AtomicInteger errors = new AtomicInteger(0);
        final AtomicLong acquisitions = new AtomicLong(0);
        final AtomicLong releasedAt = new AtomicLong(0);
        final List<Long> handoffs = Collections.synchronizedList(new ArrayList<>());
        volatile boolean stop = false;
        long elapsed;

        Run(List<InterProcessMutex> mutexes, long millis) throws InterruptedException {
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int i = 0; i < mutexes.size(); i++) {
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
            Thread.sleep(millis);
            stop = true;
            for (Thread t : threads) t.join();
            elapsed = System.nanoTime() - t0;
        }

        long medianHandoff() {
            synchronized (handoffs) {
                return median(new ArrayList<>(handoffs));
            }
        }

        long maxHandoff() {
            synchronized (handoffs) {
                return handoffs.isEmpty() ? 0 : Collections.max(handoffs);
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String path = args[1];
        int contenders = Integer.parseInt(args[2]);
        long warmUp = Long.parseLong(args[3]);
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
        int warmViolations = 0;
        int warmErrors = 0;
        if (contenders == 1) {
            for (long i = 0; i < warmUp; i++) {
                mutexes.get(0).acquire();
                mutexes.get(0).release();
            }
        } else {
            Run warm = new Run(mutexes, warmUp);
            warmViolations = warm.violations.get();
            warmErrors = warm.errors.get();
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("READY");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null && line.startsWith("go ")) {
            long amount = Long.parseLong(line.substring(3).trim());
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
                long max = cycles.isEmpty() ? 0 : Collections.max(cycles);
                result = amount + " " + elapsed + " " + median(cycles) + " 0 0 " + max;
            } else {
                Run run = new Run(mutexes, amount);
                result = run.acquisitions.get() + " " + run.elapsed + " " + run.medianHandoff()
                        + " " + (warmViolations + run.violations.get()) + " "
                        + (warmErrors + run.errors.get()) + " " + run.maxHandoff();
                warmViolations = 0;
                warmErrors = 0;
            }
            System.out.println("RESULT " + result);
            System.out.flush();
        }
        for (CuratorFramework c : clients) c.close();
    }
}
